// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package pressure keeps the host and cgroup pressure of the newest
// snapshot the sessionstate exporter received and serves it as
// gpotel.v1.PressureService.
package pressure

import (
	"context"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// Resource is a host resource's pressure or a cgroup resource's.
type Resource struct {
	Host    string
	Figures []*gpotelv1.PressureFigures // a host's
	Group   *gpotelv1.GroupPressure     // a cgroup's
}

// Batch is what one batch holds of pressure.
type Batch struct {
	// Closing: the batch closes a snapshot (it has a snapshot resource);
	// Time is that snapshot's.
	Closing bool
	Time    pcommon.Timestamp
	// Resources are the host and cgroup resources, in order.
	Resources []Resource
}

// Store keeps the host and cgroup pressure of the latest snapshot.
type Store struct {
	mu     sync.Mutex
	latest *gpotelv1.GetHostPressureResponse
}

// Consume replaces the stored figures with those of a batch that closes a
// snapshot; other batches leave them alone.
func (p *Store) Consume(b Batch) {
	if !b.Closing {
		return
	}
	hosts := map[string]*gpotelv1.HostPressure{}
	host := func(name string) *gpotelv1.HostPressure {
		if hosts[name] == nil {
			hosts[name] = &gpotelv1.HostPressure{Hostname: name}
		}
		return hosts[name]
	}
	for _, r := range b.Resources {
		if r.Group != nil {
			h := host(r.Host)
			h.Groups = append(h.Groups, r.Group)
		} else {
			host(r.Host).Pressure = r.Figures
		}
	}
	resp := &gpotelv1.GetHostPressureResponse{SnapshotTimeUnixNano: int64(b.Time)} //nolint:gosec // nanoseconds since 1970 fit int64 until 2262
	for _, h := range hosts {
		snapshot.SortGroups(h.Groups)
		resp.Hosts = append(resp.Hosts, h)
	}
	slices.SortFunc(resp.Hosts, func(a, b *gpotelv1.HostPressure) int { return strings.Compare(a.GetHostname(), b.GetHostname()) })
	p.mu.Lock()
	p.latest = resp
	p.mu.Unlock()
}

// Get is the latest snapshot's figures; empty before the first.
func (p *Store) Get() *gpotelv1.GetHostPressureResponse {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.latest == nil {
		return &gpotelv1.GetHostPressureResponse{}
	}
	return proto.Clone(p.latest).(*gpotelv1.GetHostPressureResponse)
}

// Service is gpotel.v1.PressureService over a Store.
type Service struct {
	gpotelv1.UnimplementedPressureServiceServer
	Store *Store
}

// GetHostPressure answers the latest snapshot's figures.
func (s *Service) GetHostPressure(context.Context, *gpotelv1.GetHostPressureRequest) (*gpotelv1.GetHostPressureResponse, error) {
	return s.Store.Get(), nil
}
