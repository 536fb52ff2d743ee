// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package pipelinetest builds receiver-shaped snapshots for tests and
// benchmarks of the snapshotdiff processor and the sessionstate exporter,
// through the pipeline contract's own encoders: a test's input is what the
// receiver writes, not a copy of it.
package pipelinetest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/internal/pipeline/sparse"
)

// Scope is the instrumentation scope of what the builders write.
var Scope = snapshot.Scope{Name: "github.com/gpotel/gpotel/internal/pipeline/pipelinetest"}

// Snapshot is one scrape as the gpsession receiver emits it.
type Snapshot struct {
	Time        time.Time
	TmID        int64
	Coordinator string // host.name of the snapshot and session resources
	Dialect     string // gpotel.dialect; "": gp6
	Hosts       []Host
	Sessions    []Session
	Processes   []Process
	// Readings are the hosts' pressure and control groups.
	Readings []snapshot.HostReading
	// Endings are the coordinator's log records and exits (endings resources).
	Endings []snapshot.HostEndings
}

// Host is one gpotel.host.up / gpotel.host.processes pair, the host's
// read delay (gpotel.host.read_delay; 0: not measured) and its online CPUs
// (gpotel.host.cpus; 0: not reported).
type Host struct {
	Name      string
	Up        bool
	Processes int64
	ReadDelay time.Duration
	CPUs      uint32
}

// Session is one coordinator pg_stat_activity row heading a session.
type Session struct {
	ID   int64
	PID  int64
	DB   string
	User string
	// ResourceQueue is the role's resource queue; "": none named.
	ResourceQueue string
	System        bool
	Own           bool // one of the collector's own connections
	State         string
	// QueryStart, StateChange, BackendStart (zero: NULL), Query and
	// Waiting (for a lock) go into the metadata too.
	QueryStart, StateChange, BackendStart time.Time
	Query                                 string
	Waiting                               bool
	// Backends are the processes the receiver asked the hosts about.
	Backends []pipeline.BackendRef
	// Greenplum is the server's own figures of the session (spill, a lock
	// wait, vmem) the receiver read; nil without them.
	Greenplum *snapshot.GreenplumSession
}

// Process is one process an agent answered for, in SI units.
type Process struct {
	Host    string
	Segment int64
	Session int64
	PID     int64
	Created time.Time

	CPUUser, CPUSystem      float64 // s
	ReadBytes, WriteBytes   int64
	CancelledWrite          int64
	DiskDelay               float64 // s
	RChar, WChar            int64
	SyscR, SyscW            int64
	MajorFaults, MinorFault int64
	Voluntary, Involuntary  int64
	RunDelay                float64 // s
	// Delays of delay accounting beyond run and block I/O, in s; 0: absent.
	SwapinDelay, FreepagesDelay, ThrashingDelay float64
	CompactDelay, WpcopyDelay, IRQDelay         float64

	RSS, RSSAnon, RSSFile, RSSShmem int64
	Virtual, Peak, VirtualPeak      int64
	Swap, PageTables                int64 // 0: absent
	Threads                         int64 // 0: one

	NoIO bool // /proc/<pid>/io was unreadable: its metrics are absent
	// NoDelayacct: kernel.task_delayacct was off on its host, so its block
	// I/O wait is absent.
	NoDelayacct bool
	// NoSegment leaves gpotel.segment.id off its gpotel.process.info point
	// (input no receiver writes, for the consumers' tests).
	NoSegment bool

	CommandCount int64 // cmd<N> of its title; 0: the title has none

	// Exited makes it part of an exited resource: final totals from an exit
	// record; Unattributed leaves its session out (no scrape saw it).
	Exited, Unattributed bool
	// Unrecorded makes it a postmaster's point in an unrecorded resource
	// (no session): CPU its reaped children used beyond their exit records.
	Unrecorded bool
}

// figures converts the process to the contract's reading: the figures an
// agent answer with stat, status and (unless NoIO) io gives.
func (p *Process) figures() snapshot.Process {
	r := snapshot.Process{PID: p.PID, CreationTime: p.Created, HasStat: true}
	seconds := map[pipeline.Figure]float64{pipeline.CPUUser: p.CPUUser, pipeline.CPUSystem: p.CPUSystem, pipeline.RunDelay: p.RunDelay}
	for f, v := range map[pipeline.Figure]float64{pipeline.DelaySwapin: p.SwapinDelay, pipeline.DelayFreepages: p.FreepagesDelay,
		pipeline.DelayThrashing: p.ThrashingDelay, pipeline.DelayCompact: p.CompactDelay, pipeline.DelayWpcopy: p.WpcopyDelay, pipeline.DelayIRQ: p.IRQDelay} {
		if v != 0 {
			seconds[f] = v
		}
	}
	if !p.NoDelayacct {
		seconds[pipeline.DiskDelay] = p.DiskDelay
	}
	ints := map[pipeline.Figure]int64{
		pipeline.FaultsMajor: p.MajorFaults, pipeline.FaultsMinor: p.MinorFault,
		pipeline.SwitchesVoluntary: p.Voluntary, pipeline.SwitchesInvoluntary: p.Involuntary,
		pipeline.MemoryUsage: p.RSS, pipeline.MemoryVirtual: p.Virtual, pipeline.RSSAnon: p.RSSAnon, pipeline.RSSFile: p.RSSFile,
		pipeline.RSSShmem: p.RSSShmem, pipeline.MemoryPeak: p.Peak, pipeline.MemoryVirtualPeak: p.VirtualPeak, pipeline.ThreadCount: max(p.Threads, 1),
	}
	for f, v := range map[pipeline.Figure]int64{pipeline.MemorySwap: p.Swap, pipeline.MemoryPageTables: p.PageTables} {
		if v != 0 {
			ints[f] = v
		}
	}
	if !p.NoIO {
		for f, v := range map[pipeline.Figure]int64{pipeline.DiskRead: p.ReadBytes, pipeline.DiskWrite: p.WriteBytes,
			pipeline.CancelledWrite: p.CancelledWrite, pipeline.CharsRead: p.RChar, pipeline.CharsWrite: p.WChar,
			pipeline.SyscallsRead: p.SyscR, pipeline.SyscallsWrite: p.SyscW} {
			ints[f] = v
		}
	}
	if p.CommandCount != 0 {
		ints[pipeline.CommandCount] = p.CommandCount
	}
	for f, v := range seconds {
		r.Set(f, v, 0)
	}
	for f, v := range ints {
		r.Set(f, 0, v)
	}
	return r
}

// Metrics renders the snapshot as one pmetric.Metrics: its closing batch
// with its processes.
func (s Snapshot) Metrics() pmetric.Metrics {
	md := s.closing()
	s.appendProcesses(md, s.Processes)
	return md
}

// Batches renders the snapshot as the receiver hands it on: one batch of
// process resources per host, then the closing batch (Metrics without the
// processes).
func (s Snapshot) Batches() []pmetric.Metrics {
	var out []pmetric.Metrics
	var hosts []string
	byHost := map[string][]Process{}
	for _, p := range s.Processes {
		if _, ok := byHost[p.Host]; !ok {
			hosts = append(hosts, p.Host)
		}
		byHost[p.Host] = append(byHost[p.Host], p)
	}
	for _, h := range hosts {
		md := pmetric.NewMetrics()
		s.appendProcesses(md, byHost[h])
		out = append(out, md)
	}
	return append(out, s.closing())
}

func (s Snapshot) closing() pmetric.Metrics {
	c := s.closingBatch()
	md := snapshot.NewClosingEncoder(Scope, s.Time, snapshot.Switches{}).Encode(&c)
	for i := range s.Endings {
		snapshot.AppendEndings(md.ResourceMetrics(), Scope, s.TmID, &s.Endings[i])
	}
	return md
}

func (s Snapshot) closingBatch() snapshot.Closing {
	c := snapshot.Closing{Time: s.Time, TmID: s.TmID, Dialect: cmp.Or(s.Dialect, "gp6"), Coordinator: s.Coordinator, Readings: s.Readings}
	for _, h := range s.Hosts {
		c.Hosts = append(c.Hosts, snapshot.HostAnswer{Host: h.Name, Up: h.Up, Processes: h.Processes, ReadDelay: int64(h.ReadDelay), CPUs: h.CPUs})
	}
	for _, ss := range s.Sessions {
		st := snapshot.SessionState{
			State:        pipeline.Null[string]{V: ss.State, Valid: true},
			QueryStart:   pipeline.Null[time.Time]{V: ss.QueryStart, Valid: !ss.QueryStart.IsZero()},
			StateChange:  pipeline.Null[time.Time]{V: ss.StateChange, Valid: !ss.StateChange.IsZero()},
			Query:        pipeline.Null[string]{V: ss.Query, Valid: ss.Query != ""},
			BackendStart: pipeline.Null[time.Time]{V: ss.BackendStart, Valid: !ss.BackendStart.IsZero()},
			Waiting:      pipeline.Null[bool]{V: ss.Waiting, Valid: ss.Waiting},
			Backends:     ss.Backends,
		}
		c.Sessions = append(c.Sessions, snapshot.Session{ID: ss.ID, PID: ss.PID, System: ss.System, Own: ss.Own, Database: &ss.DB, User: &ss.User, State: st,
			ResourceQueue: ss.ResourceQueue, Greenplum: ss.Greenplum})
	}
	return c
}

// Receiver sends snapshots as the gpsession receiver does
// (docs/pipeline.md, sparse batches): each answering host's live processes
// through one sparse.Sender, kept from snapshot to snapshot, in batches
// of at most BatchSize processes (0: one batch per host), then the
// closing batch its sparse.Outgoing stamped, with the exited and unrecorded
// processes.
type Receiver struct {
	BatchSize int
	sender    *sparse.Sender
	next      consumer.Metrics
}

// NewReceiver sends to next.
func NewReceiver(next consumer.Metrics) *Receiver {
	return &Receiver{sender: sparse.NewSender(snapshot.NewProcessEncoder(Scope, snapshot.Switches{}), next, false), next: next}
}

// Send sends the snapshot; a host that is down sends nothing. It returns
// the errors of the process batches by host, and the closing batch's.
func (r *Receiver) Send(ctx context.Context, s Snapshot) (map[string]error, error) {
	outgoing := r.sender.Snapshot(s.Time, s.TmID)
	byHost := map[string][]snapshot.ProcessEntry{}
	var rest []Process
	for i := range s.Processes {
		p := &s.Processes[i]
		if p.Exited || p.Unrecorded {
			rest = append(rest, *p)
			continue
		}
		byHost[p.Host] = append(byHost[p.Host], snapshot.ProcessEntry{Session: p.Session, Segment: p.Segment, System: p.Session == 0, Process: p.figures()})
	}
	errs := map[string]error{}
	for _, h := range s.Hosts {
		if !h.Up {
			continue
		}
		entries := byHost[h.Name]
		size := r.BatchSize
		if size <= 0 {
			size = max(len(entries), 1)
		}
		for from := 0; from == 0 || from < len(entries); from += size {
			if _, _, err := outgoing.Send(ctx, h.Name, entries[from:min(from+size, len(entries))], nil); err != nil && errs[h.Name] == nil {
				errs[h.Name] = err
			}
		}
	}
	c := s.closingBatch()
	outgoing.Close(&c)
	md := snapshot.NewClosingEncoder(Scope, s.Time, snapshot.Switches{}).Encode(&c)
	s.appendProcesses(md, rest)
	return errs, r.next.ConsumeMetrics(ctx, md)
}

// appendProcesses writes one resource per (host, kind) batch and session,
// in the order the pairs first appear.
func (s Snapshot) appendProcesses(md pmetric.Metrics, procs []Process) {
	type group struct {
		host string
		kind pipeline.ResourceKind
	}
	var groups []group
	members := map[group][]snapshot.ProcessEntry{}
	noSegment := map[int64]bool{}
	for i := range procs {
		p := &procs[i]
		g := group{p.Host, pipeline.KindProcess}
		e := snapshot.ProcessEntry{Session: p.Session, Segment: p.Segment, System: p.Session == 0, Process: p.figures()}
		switch {
		case p.Unrecorded:
			g.kind, e.Session = pipeline.KindUnrecorded, snapshot.NoSession
		case p.Exited:
			g.kind = pipeline.KindExited
			if p.Unattributed {
				e.Session = snapshot.NoSession
			}
		}
		if p.NoSegment {
			noSegment[p.PID] = true
		}
		if _, ok := members[g]; !ok {
			groups = append(groups, g)
		}
		members[g] = append(members[g], e)
	}
	enc := snapshot.NewProcessEncoder(Scope, snapshot.Switches{})
	for _, g := range groups {
		b := snapshot.ProcessBatch{Time: pcommon.NewTimestampFromTime(s.Time), TmID: s.TmID, Host: g.host, Kind: g.kind, Entries: members[g]}
		enc.Append(md.ResourceMetrics(), &b, nil)
	}
	if len(noSegment) > 0 {
		dropSegments(md, noSegment)
	}
}

// dropSegments takes gpotel.segment.id off the info points of the pids.
func dropSegments(md pmetric.Metrics, pids map[int64]bool) {
	Points(md, pipeline.MetricProcessInfo, func(_ pcommon.Map, dp pmetric.NumberDataPoint) {
		if pid, _ := dp.Attributes().Get(pipeline.AttrProcessPID); pids[pid.Int()] {
			dp.Attributes().Remove(pipeline.AttrSegmentID)
		}
	})
}

// Points calls fn with every point of the metric named, and the attributes
// of its resource, in the order of the batch.
func Points(md pmetric.Metrics, name string, fn func(resource pcommon.Map, dp pmetric.NumberDataPoint)) {
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				if ms.At(k).Name() != name {
					continue
				}
				dps := pipeline.NumberPoints(ms.At(k))
				for d := range dps.Len() {
					fn(rms.At(i).Resource().Attributes(), dps.At(d))
				}
			}
		}
	}
}

// CompareGolden compares md with the golden file at path (pdata's JSON),
// or first writes the file from md when update is set.
func CompareGolden(t testing.TB, path string, md pmetric.Metrics, update bool) {
	t.Helper()
	if update {
		b, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := json.Indent(&out, b, "", "  "); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(out.Bytes(), '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path) // #nosec G304 -- a test's own testdata file
	if err != nil {
		t.Fatal(err)
	}
	want, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := pmetrictest.CompareMetrics(want, md); err != nil {
		t.Fatalf("%s: %v (go test -run Golden -update rewrites it when the change is meant)", path, err)
	}
}
