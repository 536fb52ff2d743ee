// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/internal/pipeline"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// pressureStore keeps the host and cgroup pressure of the latest snapshot
// for gpotel.v1.PressureService.
type pressureStore struct {
	mu     sync.Mutex
	latest *gpotelv1.GetHostPressureResponse
}

// consume replaces the stored figures with those of a batch that closes a
// snapshot; other batches leave them alone.
func (p *pressureStore) consume(b *batch) {
	if len(b.snapshots) == 0 {
		return
	}
	hosts := map[string]*gpotelv1.HostPressure{}
	host := func(name string) *gpotelv1.HostPressure {
		if hosts[name] == nil {
			hosts[name] = &gpotelv1.HostPressure{Hostname: name}
		}
		return hosts[name]
	}
	for _, r := range b.pressure {
		if r.group != nil {
			h := host(r.host)
			h.Groups = append(h.Groups, r.group)
		} else {
			host(r.host).Pressure = r.figures
		}
	}
	at := b.snapshots[len(b.snapshots)-1].Time
	resp := &gpotelv1.GetHostPressureResponse{SnapshotTimeUnixNano: int64(at)} //nolint:gosec // nanoseconds since 1970 fit int64 until 2262
	for _, h := range hosts {
		pipeline.SortGroups(h.Groups)
		resp.Hosts = append(resp.Hosts, h)
	}
	slices.SortFunc(resp.Hosts, func(a, b *gpotelv1.HostPressure) int { return strings.Compare(a.GetHostname(), b.GetHostname()) })
	p.mu.Lock()
	p.latest = resp
	p.mu.Unlock()
}

func (p *pressureStore) get() *gpotelv1.GetHostPressureResponse {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.latest == nil {
		return &gpotelv1.GetHostPressureResponse{}
	}
	return proto.Clone(p.latest).(*gpotelv1.GetHostPressureResponse)
}

// pressureService is gpotel.v1.PressureService over the store.
type pressureService struct {
	gpotelv1.UnimplementedPressureServiceServer
	store *pressureStore
}

func (s *pressureService) GetHostPressure(context.Context, *gpotelv1.GetHostPressureRequest) (*gpotelv1.GetHostPressureResponse, error) {
	return s.store.get(), nil
}
