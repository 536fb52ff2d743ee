// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/internal/pipeline/sparse"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

// scrapeResult is what a scrape learnt that its closing batch carries: the
// hosts' answers and the sessions.
type scrapeResult struct {
	time            time.Time
	dialect         dialect.Dialect
	tmID            int64
	coordinatorHost string
	sessions        []SessionRow // the session heads to emit
	queries         []hostQuery  // what each host was asked
	results         []hostResult // in the order of queries
	queryMaxLength  int
	resourceGroups  map[uint32]string // resource group oid -> name
	resourceQueues  map[string]string // role name -> its resource queue's name
	// greenplum is the server's own figures per session, from the latest
	// read not older than max_age; nil without one.
	greenplum map[int64]*snapshot.GreenplumSession
}

// emitStats counts what the emission kept and dropped.
type emitStats struct {
	processes     int // processes written into process resources
	withoutStat   int // answered without /proc/<pid>/stat: no creation time, so no identity
	answeredHosts int
	failedHosts   int
}

// snapshotEmitter writes snapshots as pdata through the pipeline
// contract's encoders, under the user's metrics and resource_attributes
// switches.
type snapshotEmitter struct {
	scope   snapshot.Scope
	procs   *snapshot.ProcessEncoder
	closing *snapshot.ClosingEncoder
	scratch sync.Pool // *answerScratch, reused across answers and scrapes
}

// answerScratch is what one goroutine reuses from answer to answer.
type answerScratch struct {
	entries []snapshot.ProcessEntry
	order   []int32
}

// newSnapshotEmitter makes an emitter whose closing-batch points start at
// start: when the receiver did, as mdatagen's builder has them.
func newSnapshotEmitter(mbc metadata.MetricsBuilderConfig, settings receiver.Settings, start time.Time) (*snapshotEmitter, error) {
	sw, err := switchesOf(mbc)
	if err != nil {
		return nil, err
	}
	scope := snapshot.Scope{Name: metadata.ScopeName, Version: settings.BuildInfo.Version}
	e := &snapshotEmitter{
		scope:   scope,
		procs:   snapshot.NewProcessEncoder(scope, sw),
		closing: snapshot.NewClosingEncoder(scope, start, sw),
	}
	e.scratch.New = func() any { return &answerScratch{} }
	return e, nil
}

// answerWrite is one agent answer and what the emission needs around it.
type answerWrite struct {
	host   string
	consts kernelunits.Host
	infos  []*yagpcc.GpPidProcInfo
	byPID  map[int64]*Backend // the asked backends; checkAnswer let only these through
	// unchanged are the asked backends a delta answer left out.
	unchanged []*Backend
	// carry: the host's unchanged processes are carried as a whole
	// (sparse.Outgoing.Carry): leftOut counts them, gone lists the asked
	// pids not answered or answered without a stat.
	carry   bool
	leftOut int
	gone    []int64
}

// emitAnswer hands one agent answer on as a process batch
// (docs/pipeline.md, process resources and sparse batches); it may run on many
// goroutines at once, one per host. It returns what it sent and how many
// processes it left out for want of a stat; an error means the batch did
// not reach the pipeline.
func (e *snapshotEmitter) emitAnswer(ctx context.Context, outgoing *sparse.Outgoing, a *answerWrite) (sent sparse.Sent, withoutStat int, err error) {
	sc := e.scratch.Get().(*answerScratch)
	defer e.scratch.Put(sc)
	sc.entries = sc.entries[:0]
	for _, info := range a.infos {
		b := a.byPID[info.GetPid()]
		sc.entries = append(sc.entries, snapshot.ProcessEntry{Session: b.SessionID, Segment: b.SegmentID,
			BackendType: b.BackendType, System: isSystemProcess(b.SessionID, b.BackendType)})
		pe := &sc.entries[len(sc.entries)-1]
		if pe.Process = snapshot.ProcessFromAnswer(info, a.consts); !pe.Process.HasStat {
			withoutStat++
			sc.entries = sc.entries[:len(sc.entries)-1]
		}
	}
	sent, sc.order, err = outgoing.Send(ctx, a.host, sc.entries, sc.order)
	if err == nil && a.carry {
		var kept int
		kept, err = outgoing.Carry(a.host, a.leftOut, a.gone)
		sent.Unchanged += kept
		return sent, withoutStat, err
	}
	if err != nil || len(a.unchanged) == 0 {
		return sent, withoutStat, err
	}
	sc.entries = sc.entries[:0]
	for _, b := range a.unchanged {
		sc.entries = append(sc.entries, snapshot.ProcessEntry{Session: b.SessionID, Segment: b.SegmentID,
			BackendType: b.BackendType, System: isSystemProcess(b.SessionID, b.BackendType), Process: snapshot.Process{PID: b.PID}})
	}
	kept, err := outgoing.Keep(a.host, sc.entries)
	sent.Unchanged += kept
	return sent, withoutStat, err
}

// emitSnapshot writes the batch that closes a snapshot: the snapshot
// resource with each host's answer, the hosts' pressure and control
// groups, and one resource per session, every data point at s.time.
func (e *snapshotEmitter) emitSnapshot(s *scrapeResult, outgoing *sparse.Outgoing) (pmetric.Metrics, emitStats) {
	var st emitStats
	c := snapshot.Closing{Time: s.time, TmID: s.tmID, Dialect: string(s.dialect), Coordinator: s.coordinatorHost}
	for i, r := range s.results {
		if r.up {
			st.answeredHosts++
		} else {
			st.failedHosts++
		}
		st.processes += r.written
		st.withoutStat += r.withoutStat
		h := snapshot.HostAnswer{Host: r.host, Up: r.up, Processes: int64(len(s.queries[i].procs)), CPUs: r.cpus}
		if r.up && r.answeredAt.After(s.time) {
			h.ReadDelay = int64(r.answeredAt.Sub(s.time))
		}
		c.Hosts = append(c.Hosts, h)
	}
	c.Readings = hostReadings(s)
	pressure := sessionPressureOf(s)
	backends := sessionBackends(s)
	for _, row := range s.sessions {
		c.Sessions = append(c.Sessions, snapshot.Session{
			ID: row.SessionID, PID: row.PID, System: isSystemSession(row), Own: row.Own, Database: row.Datname, User: row.Usename,
			ResourceQueue:  s.resourceQueueOf(row.Usename),
			State:          sessionState(&row, s.queryMaxLength, backends[row.SessionID]),
			CgroupPressure: pressure.of(row.SessionID),
			Greenplum:      s.greenplum[row.SessionID],
		})
	}
	if outgoing != nil {
		outgoing.Close(&c)
		for i := range c.Hosts {
			if r := &s.results[i]; r.up && !c.Hosts[i].Up {
				// Carried as a whole, its left out did not add up to what was sent.
				r.up, r.err = false, fmt.Errorf("host %s: the agent left out as unchanged processes the receiver did not send as they are", r.host)
				st.answeredHosts--
				st.failedHosts++
			}
		}
	}
	return e.closing.Encode(&c), st
}

// resourceQueueOf names the resource queue of the role user; "" when
// unknown.
func (s *scrapeResult) resourceQueueOf(user *string) string {
	if user == nil {
		return ""
	}
	return s.resourceQueues[*user]
}

// sessionBackends lists, per session id, every process the receiver asked
// a host about in this scrape (docs/pipeline.md, gpotel.session.info "backends").
func sessionBackends(s *scrapeResult) map[int64][]pipeline.BackendRef {
	out := map[int64][]pipeline.BackendRef{}
	for _, q := range s.queries {
		for _, p := range q.procs {
			out[p.SessionID] = append(out[p.SessionID], pipeline.BackendRef{Host: q.host, SegmentID: p.SegmentID, PID: p.PID})
		}
	}
	return out
}

// sessionState is the volatile pg_stat_activity state of a session row,
// its query cut to queryMax bytes (none with queryMax 0).
func sessionState(r *SessionRow, queryMax int, backends []pipeline.BackendRef) snapshot.SessionState {
	st := snapshot.SessionState{
		ApplicationName:  pipeline.NullOf(r.ApplicationName),
		ClientAddr:       pipeline.NullOf(r.ClientAddr),
		ClientHostname:   pipeline.NullOf(r.ClientHostname),
		ClientPort:       pipeline.NullOf(r.ClientPort),
		BackendStart:     pipeline.NullOf(r.BackendStart),
		XactStart:        pipeline.NullOf(r.XactStart),
		QueryStart:       pipeline.NullOf(r.QueryStart),
		StateChange:      pipeline.NullOf(r.StateChange),
		State:            pipeline.NullOf(r.State),
		Waiting:          pipeline.NullOf(r.Waiting),
		WaitingReason:    pipeline.NullOf(r.WaitingReason),
		WaitEventType:    pipeline.NullOf(r.WaitEventType),
		WaitEvent:        pipeline.NullOf(r.WaitEvent),
		BackendType:      pipeline.NullOf(r.BackendType),
		BackendXID:       pipeline.NullOf(r.BackendXID),
		BackendXmin:      pipeline.NullOf(r.BackendXmin),
		RsgID:            pipeline.NullOf(r.RsgID),
		RsgName:          pipeline.NullOf(r.RsgName),
		RsgQueueDuration: pipeline.NullOf(r.RsgQueueDuration),
		Backends:         backends,
	}
	if r.Query != nil && queryMax > 0 {
		q, cut := pipeline.CutUTF8(*r.Query, queryMax)
		st.Query, st.QueryTruncated = pipeline.Null[string]{V: q, Valid: true}, cut
	}
	return st
}
