// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/internal/sessionaction"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor"
)

// answering is a Signaller that answers every statement with done, err.
type answering struct {
	done bool
	err  error
}

func (a answering) Cancel(context.Context, sessionaction.Backend, time.Time) (bool, error) {
	return a.done, a.err
}
func (a answering) Terminate(context.Context, sessionaction.Backend) (bool, error) {
	return a.done, a.err
}
func (a answering) Move(context.Context, sessionaction.Backend, string) (bool, error) {
	return a.done, a.err
}

// endingOf runs rule over session id's spilling query through the real
// processor and the real action path (its server answering as sig does):
// two snapshots in which it spills (the rule fires at the second), then
// one in which it is idle after the server log said how it ended. It
// returns the query's finished-work event.
func endingOf(t *testing.T, rule RuleConfig, sig sessionaction.Signaller, id int64, how snapshot.Ending) map[string]any {
	t.Helper()
	h := newHarness(t, rule)
	h.conn.actor = &actionPath{actor: sessionaction.NewWithSignaller(sig, time.Minute), now: func() time.Time { return h.now }}
	sink := new(consumertest.MetricsSink)
	tee, err := consumer.NewMetrics(func(ctx context.Context, md pmetric.Metrics) error {
		require.NoError(t, sink.ConsumeMetrics(ctx, md))
		return h.conn.ConsumeMetrics(ctx, md)
	})
	require.NoError(t, err)
	f := snapshotdiffprocessor.NewFactory()
	pcfg := f.CreateDefaultConfig().(*snapshotdiffprocessor.Config)
	pcfg.Windows = []time.Duration{time.Minute}
	h.proc, err = f.CreateMetrics(context.Background(), processortest.NewNopSettings(f.Type()), pcfg, tee)
	require.NoError(t, err)

	h.feed(t, snapshotAt(10, work{id: id, spill: 2 * gib}))
	h.feed(t, snapshotAt(20, work{id: id, spill: 2 * gib}))
	idle := snapshotAt(30, work{id: id, state: "idle"})
	idle.Sessions[0].StateChange = at(25)
	how.Session, how.PID, how.Time, how.CommandCount = id, 1000+id, at(24).UnixNano(), 1
	idle.Endings = []snapshot.HostEndings{{Host: "mdw", LogReadThrough: at(29).UnixNano(), Endings: []snapshot.Ending{how}}}
	h.feed(t, idle)
	later := snapshotAt(40, work{id: id, state: "idle"})
	later.Sessions[0].StateChange = at(25)
	later.Endings = []snapshot.HostEndings{{Host: "mdw", LogReadThrough: at(39).UnixNano()}}
	h.feed(t, later)
	for _, md := range sink.AllMetrics() {
		rms := md.ResourceMetrics()
		for i := range rms.Len() {
			attrs := rms.At(i).Resource().Attributes()
			if pipeline.KindOf(attrs) == pipeline.KindFinishedQuery {
				return attrs.AsRaw()
			}
		}
	}
	t.Fatal("no finished query")
	return nil
}

var cancelledByUser = snapshot.Ending{Severity: "ERROR", SQLState: "57014", Message: "canceling statement due to user request"}

// TestTheEndingNamesTheRuleThatEndedIt: a query an enforcing rule
// cancelled ends cancelled, and its event names the rule.
func TestTheEndingNamesTheRuleThatEndedIt(t *testing.T) {
	ev := endingOf(t, spillRule("runaway-spill", "cancel", "enforce"), answering{done: true}, 71, cancelledByUser)
	assert.Equal(t, events.QueryCancelled, ev[events.AttrQueryStatus])
	assert.Equal(t, "runaway-spill", ev[events.AttrEndedByRule])
}

// TestAnEndingByItselfNamesNoRule: a query that ended by itself names no
// rule, even one in observe mode that fired on it, one whose action
// failed, or one whose cancel the server did but that ended otherwise
// (a statement timeout, an error).
func TestAnEndingByItselfNamesNoRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode string
		sig  sessionaction.Signaller
		how  snapshot.Ending
		id   int64
	}{
		{"observe mode", "observe", answering{done: true}, cancelledByUser, 72},
		{"the cancel failed", "enforce", answering{err: errors.New("connection refused")}, cancelledByUser, 73},
		{"the server did not cancel", "enforce", answering{}, cancelledByUser, 74},
		{"a statement timeout", "enforce", answering{done: true},
			snapshot.Ending{Severity: "ERROR", SQLState: "57014", Message: "canceling statement due to statement timeout"}, 75},
		{"an error of its own", "enforce", answering{done: true}, snapshot.Ending{Severity: "ERROR", SQLState: "22012", Message: "division by zero"}, 76},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := endingOf(t, spillRule("runaway-spill", "cancel", tc.mode), tc.sig, tc.id, tc.how)
			assert.NotContains(t, ev, events.AttrEndedByRule)
		})
	}
}
