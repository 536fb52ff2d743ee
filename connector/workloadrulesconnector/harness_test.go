// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/gpotel/gpotel/connector/workloadrulesconnector/internal/metadata"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor"
)

// act is one action the recording actor was asked for.
type act struct {
	session int64
	action  string
	group   string
}

// recordingActor records what the rules asked the action path to do: a
// fake of the Actor interface for the unit tests of the rules' logic.
type recordingActor struct {
	mu   sync.Mutex
	acts []act
}

func (a *recordingActor) Act(_ context.Context, t Target, _, action, group string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acts = append(a.acts, act{session: t.Session.ID, action: action, group: group})
	return nil
}

func (a *recordingActor) taken() []act {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]act(nil), a.acts...)
}

// harness is the real snapshotdiff processor feeding the connector, whose
// clock stands at the newest snapshot's time unless a test moves it.
type harness struct {
	proc  processor.Metrics
	conn  *workloadRules
	logs  *consumertest.LogsSink
	actor *recordingActor
	now   time.Time
}

func newHarness(t *testing.T, rules ...RuleConfig) *harness {
	t.Helper()
	cfg := defaultConfig()
	cfg.Dialect, cfg.Window, cfg.MaxViewAge, cfg.Rules = dialect.GP7, time.Minute, time.Minute, rules
	withActionConnection(cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h := &harness{logs: new(consumertest.LogsSink), actor: &recordingActor{}}
	conn, err := newWorkloadRules(cfg, connectortest.NewNopSettings(metadata.Type), h.logs, h.actor)
	if err != nil {
		t.Fatal(err)
	}
	conn.now = func() time.Time { return h.now }
	h.conn = conn
	f := snapshotdiffprocessor.NewFactory()
	pcfg := f.CreateDefaultConfig().(*snapshotdiffprocessor.Config)
	pcfg.Windows = []time.Duration{time.Minute}
	if h.proc, err = f.CreateMetrics(context.Background(), processortest.NewNopSettings(f.Type()), pcfg, conn); err != nil {
		t.Fatal(err)
	}
	return h
}

// withActionConnection gives cfg an action connection, which enforcing
// rules need to start; the tests' actors never open it.
func withActionConnection(cfg *Config) {
	cfg.Actions.Host, cfg.Actions.Database, cfg.Actions.User = "/tmp", "postgres", "gpotel_actions"
}

// feed hands the snapshot through the processor to the connector, the
// clock at the snapshot's time.
func (h *harness) feed(t *testing.T, s pipelinetest.Snapshot) {
	t.Helper()
	h.now = s.Time
	if err := h.proc.ConsumeMetrics(context.Background(), s.Metrics()); err != nil {
		t.Fatal(err)
	}
}

// processed is the real processor's output (window 1m) for the last of
// snaps, fed in order.
func processed(tb testing.TB, snaps ...pipelinetest.Snapshot) pmetric.Metrics {
	tb.Helper()
	sink := new(consumertest.MetricsSink)
	f := snapshotdiffprocessor.NewFactory()
	pcfg := f.CreateDefaultConfig().(*snapshotdiffprocessor.Config)
	pcfg.Windows = []time.Duration{time.Minute}
	p, err := f.CreateMetrics(context.Background(), processortest.NewNopSettings(f.Type()), pcfg, sink)
	if err != nil {
		tb.Fatal(err)
	}
	for _, s := range snaps {
		if err := p.ConsumeMetrics(context.Background(), s.Metrics()); err != nil {
			tb.Fatal(err)
		}
	}
	all := sink.AllMetrics()
	return all[len(all)-1]
}

// events are the gpotel.rule.action records handed on so far.
func (h *harness) events() []plog.LogRecord {
	var out []plog.LogRecord
	for _, l := range h.logs.AllLogs() {
		rls := l.ResourceLogs()
		for i := range rls.Len() {
			sls := rls.At(i).ScopeLogs()
			for j := range sls.Len() {
				lrs := sls.At(j).LogRecords()
				for k := range lrs.Len() {
					out = append(out, lrs.At(k))
				}
			}
		}
	}
	return out
}

func attr(lr plog.LogRecord, key string) string {
	v, ok := lr.Attributes().Get(key)
	if !ok {
		return ""
	}
	return v.AsString()
}

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return epoch.Add(time.Duration(sec * float64(time.Second))) }

// work is one session of a test snapshot: a coordinator backend running
// one statement (cmd1) with one executor on a segment, holding spill
// bytes of workfiles, having used cpu seconds so far.
type work struct {
	id     int64
	user   string
	queue  string // the role's resource queue; "": unknown
	state  string // "": active
	spill  int64
	cpu    float64
	own    bool
	system bool
}

// snapshotAt is the sessions at sec, on a coordinator mdw and one segment host.
func snapshotAt(sec float64, sessions ...work) pipelinetest.Snapshot {
	s := pipelinetest.Snapshot{Time: at(sec), TmID: 1700000000, Coordinator: "mdw",
		Hosts: []pipelinetest.Host{{Name: "mdw", Up: true}, {Name: "sdw1", Up: true}}}
	for _, w := range sessions {
		user, state := w.user, w.state
		if user == "" {
			user = "alice"
		}
		if state == "" {
			state = "active"
		}
		ses := pipelinetest.Session{ID: w.id, PID: 1000 + w.id, DB: "sales", User: user, ResourceQueue: w.queue, State: state, System: w.system, Own: w.own,
			QueryStart: at(0), BackendStart: at(-10), Query: fmt.Sprintf("select %d", w.id)}
		if state != "active" {
			ses.StateChange = at(1)
		}
		if w.spill > 0 {
			ses.Greenplum = &snapshot.GreenplumSession{Spill: []snapshot.Spill{{Segment: 0, CommandCount: 1, Bytes: w.spill, Files: 1}}}
		}
		s.Sessions = append(s.Sessions, ses)
		s.Processes = append(s.Processes,
			pipelinetest.Process{Host: "mdw", Segment: -1, Session: w.id, PID: 1000 + w.id, Created: at(-10), CPUUser: 0.1, CommandCount: 1},
			pipelinetest.Process{Host: "sdw1", Segment: 0, Session: w.id, PID: 5000 + w.id, Created: at(-1), CPUUser: w.cpu, CommandCount: 1})
	}
	return s
}

const gib = 1 << 30
