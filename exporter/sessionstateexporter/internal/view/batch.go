// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package view is the sessionstate exporter's decoded view: each batch the
// processor delivers is decoded once here (Batch), and the session store
// keeps the newest snapshot's sessions and queries as an immutable View
// every service reads (GetGPInfo, actions, cluster top, memory contexts).
package view

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/pressure"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/output"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// Batch is one ConsumeMetrics call decoded once, in the words of the
// pipeline contract (docs/pipeline.md): every service reads its part of
// it, and none walks the resources again.
type Batch struct {
	// Snapshots are the headers of the snapshot resources, in order (a
	// batch that closes a snapshot has one).
	Snapshots []snapshot.Header
	// Tops are the first snapshot resource's host figures; nil without one.
	Tops *output.HostTops

	// Sessions are the session resources; SessionTime is the newest time
	// among them, LastWindowMissing counts those without the last_metrics
	// window.
	Sessions          []*Session
	SessionTime       time.Time
	LastWindowMissing int
	// Queries are the query resources (running and recently ended queries).
	Queries []*QueryRecord
	// Invalid counts session and query resources without a usable identity.
	Invalid int

	// Events are the finished_query and ended_session resources, for the
	// finished work store to read (nothing else does).
	Events []Event

	// Pressure is the snapshot's time and the host and cgroup resources.
	Pressure pressure.Batch
}

// Event is a finished_query or ended_session resource's kind and attributes.
type Event struct {
	Kind  pipeline.ResourceKind
	Attrs pcommon.Map
}

// Decoder decodes batches as the exporter is configured to serve them.
type Decoder struct {
	clusterID string
	windows   output.WindowMatcher
	// events: finished work is kept (finished_queries::retention > 0).
	events bool
}

// NewDecoder reports clusterID, fills last_metrics from the window of
// lastWindow, and keeps finished work events when events is set.
func NewDecoder(clusterID string, lastWindow time.Duration, events bool) Decoder {
	return Decoder{clusterID: clusterID, windows: output.WindowMatcher{Last: lastWindow}, events: events}
}

// Decode reads every resource of md by its kind; a foreign resource is
// left alone.
func (d *Decoder) Decode(md pmetric.Metrics) *Batch {
	b := &Batch{}
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		rm := rms.At(i)
		switch kind := pipeline.KindOf(rm.Resource().Attributes()); kind {
		case pipeline.KindSnapshot:
			h := snapshot.DecodeSnapshot(rm)
			b.Snapshots = append(b.Snapshots, h)
			b.Pressure.Closing, b.Pressure.Time = true, h.Time
			if b.Tops == nil {
				tops := output.DecodeHostTops(rm)
				b.Tops = &tops
			}
		case pipeline.KindSession:
			s, t, lastFound, ok := d.readSession(rm)
			if !ok {
				b.Invalid++
				continue
			}
			if !lastFound {
				b.LastWindowMissing++
			}
			if t.After(b.SessionTime) {
				b.SessionTime = t
			}
			b.Sessions = append(b.Sessions, s)
		case pipeline.KindQuery:
			if q, ok := output.DecodeQuery(rm); ok {
				b.Queries = append(b.Queries, NewQueryRecord(q))
			} else {
				b.Invalid++
			}
		case pipeline.KindFinishedQuery, pipeline.KindEndedSession:
			if d.events {
				b.Events = append(b.Events, Event{Kind: kind, Attrs: rm.Resource().Attributes()})
			}
		case pipeline.KindHost:
			host, figures := snapshot.DecodeHostPressure(rm)
			b.Pressure.Resources = append(b.Pressure.Resources, pressure.Resource{Host: host, Figures: figures})
		case pipeline.KindCgroup:
			host, g := snapshot.DecodeCgroup(rm)
			b.Pressure.Resources = append(b.Pressure.Resources, pressure.Resource{Host: host, Group: g})
		}
	}
	return b
}

// Coordinator is the coordinator host the batch's last snapshot names;
// empty without one.
func (b *Batch) Coordinator() string {
	var coordinator string
	for _, h := range b.Snapshots {
		coordinator = h.Coordinator
	}
	return coordinator
}
