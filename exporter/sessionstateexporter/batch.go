// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/pressure"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/output"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// batch is one ConsumeMetrics call decoded once, in the words of the
// pipeline contract (docs/pipeline.md): every service reads its part of
// it, and none walks the resources again.
type batch struct {
	// snapshots are the headers of the snapshot resources, in order (a
	// batch that closes a snapshot has one).
	snapshots []snapshot.Header
	// tops are the first snapshot resource's host figures; nil without one.
	tops *output.HostTops

	// sessions are the session resources; sessionTime is the newest time
	// among them, lastWindowMissing counts those without the last_metrics
	// window.
	sessions          []*session
	sessionTime       time.Time
	lastWindowMissing int
	// queries are the query resources (running and recently ended queries).
	queries []*queryRecord
	// invalid counts session and query resources without a usable identity.
	invalid int

	// events are the finished_query and ended_session events; badEvents
	// counts those left out, firstBadEvent says why the first was.
	events        []*eventRow
	badEvents     int
	firstBadEvent *badEvent

	// pressure is the snapshot's time and the host and cgroup resources.
	pressure pressure.Batch
}

// badEvent is why an event was left out.
type badEvent struct {
	kind pipeline.ResourceKind
	err  error
}

// batchDecoder decodes batches as the exporter is configured to serve them.
type batchDecoder struct {
	clusterID string
	windows   output.WindowMatcher
	// events: finished work is kept (finished_queries::retention > 0).
	events bool
}

func newBatchDecoder(cfg *Config) batchDecoder {
	return batchDecoder{clusterID: cfg.ClusterID, windows: output.WindowMatcher{Last: cfg.LastMetricsWindow}, events: cfg.FinishedQueries.Retention > 0}
}

// decode reads every resource of md by its kind; a foreign resource is
// left alone.
func (d *batchDecoder) decode(md pmetric.Metrics) *batch {
	b := &batch{}
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		rm := rms.At(i)
		switch kind := pipeline.KindOf(rm.Resource().Attributes()); kind {
		case pipeline.KindSnapshot:
			h := snapshot.DecodeSnapshot(rm)
			b.snapshots = append(b.snapshots, h)
			b.pressure.Closing, b.pressure.Time = true, h.Time
			if b.tops == nil {
				tops := output.DecodeHostTops(rm)
				b.tops = &tops
			}
		case pipeline.KindSession:
			s, t, lastFound, ok := d.readSession(rm)
			if !ok {
				b.invalid++
				continue
			}
			if !lastFound {
				b.lastWindowMissing++
			}
			if t.After(b.sessionTime) {
				b.sessionTime = t
			}
			b.sessions = append(b.sessions, s)
		case pipeline.KindQuery:
			if q, ok := output.DecodeQuery(rm); ok {
				b.queries = append(b.queries, newQueryRecord(q))
			} else {
				b.invalid++
			}
		case pipeline.KindFinishedQuery, pipeline.KindEndedSession:
			if d.events {
				b.readEvent(kind, rm)
			}
		case pipeline.KindHost:
			host, figures := snapshot.DecodeHostPressure(rm)
			b.pressure.Resources = append(b.pressure.Resources, pressure.Resource{Host: host, Figures: figures})
		case pipeline.KindCgroup:
			host, g := snapshot.DecodeCgroup(rm)
			b.pressure.Resources = append(b.pressure.Resources, pressure.Resource{Host: host, Group: g})
		}
	}
	return b
}

// readEvent keeps a finished work event, or counts it left out.
func (b *batch) readEvent(kind pipeline.ResourceKind, rm pmetric.ResourceMetrics) {
	l := queryLayout
	if kind == pipeline.KindEndedSession {
		l = sessionLayout
	}
	r, err := l.read(rm.Resource().Attributes())
	if err != nil {
		if b.firstBadEvent == nil {
			b.firstBadEvent = &badEvent{kind: l.kind, err: err}
		}
		b.badEvents++
		return
	}
	b.events = append(b.events, r)
}
