// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
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
func (p *pressureStore) consume(md pmetric.Metrics) {
	rms := md.ResourceMetrics()
	var at pcommon.Timestamp
	hosts := map[string]*gpotelv1.HostPressure{}
	host := func(name string) *gpotelv1.HostPressure {
		if hosts[name] == nil {
			hosts[name] = &gpotelv1.HostPressure{Hostname: name}
		}
		return hosts[name]
	}
	closing := false
	for i := range rms.Len() {
		rm := rms.At(i)
		switch pipeline.KindOf(rm.Resource().Attributes()) {
		case pipeline.KindSnapshot:
			closing = true
			at = pipeline.DecodeSnapshot(rm).Time
		case pipeline.KindHost:
			name, figures := pipeline.DecodeHostPressure(rm)
			host(name).Pressure = figures
		case pipeline.KindCgroup:
			name, g := pipeline.DecodeCgroup(rm)
			h := host(name)
			h.Groups = append(h.Groups, g)
		}
	}
	if !closing {
		return
	}
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
