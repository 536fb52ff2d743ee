// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sparse

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// testEntry is process 100 of session 7.
func testEntry() snapshot.ProcessEntry {
	p := snapshot.Process{PID: 100, CreationTime: time.Unix(1_700_000_000, 0), HasStat: true}
	p.Set(pipeline.CPUUser, 1.5, 0)
	return snapshot.ProcessEntry{Session: 7, Process: p}
}

// A process batch the next consumer refused makes its host not answered
// in the closing batch, whatever its agent said; the others stay up.
func TestARefusedProcessBatchClosesItsHostAsNotAnswered(t *testing.T) {
	refuse := consumer.ConsumeMetricsFunc(func(_ context.Context, md pmetric.Metrics) error {
		if h, _ := md.ResourceMetrics().At(0).Resource().Attributes().Get(pipeline.AttrHostName); h.Str() == "sdw2" {
			return errors.New("memory_limiter: refused")
		}
		return nil
	})
	f, _ := consumer.NewMetrics(refuse)
	fr := NewSender(snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{}), f, false).Snapshot(time.Unix(1_700_000_500, 0), 1)
	for _, h := range []string{"sdw1", "sdw2"} {
		_, _, err := fr.Send(context.Background(), h, []snapshot.ProcessEntry{testEntry()}, nil)
		if (err != nil) != (h == "sdw2") {
			t.Fatalf("%s: send error %v", h, err)
		}
	}
	c := snapshot.Closing{Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}, {Host: "sdw2", Up: true}}}
	fr.Close(&c)
	if !c.Hosts[0].Up || c.Hosts[1].Up {
		t.Errorf("hosts after close %+v, want sdw1 up and sdw2 down", c.Hosts)
	}
	if !c.Time.Equal(fr.Time) {
		t.Errorf("closing batch at %v, want the snapshot's time %v", c.Time, fr.Time)
	}
}

// After a host's first snapshot a sender leaves out the unchanged
// processes, in sparse batches; a dense one sends them again, in full ones.
func TestDenseSenderSendsEveryProcessInFull(t *testing.T) {
	for _, dense := range []bool{false, true} {
		var headers []snapshot.BatchHeader
		var processes []int
		sink, _ := consumer.NewMetrics(func(_ context.Context, md pmetric.Metrics) error {
			b := snapshot.ReadBatch(md)
			h, err := snapshot.DecodeBatchHeader(md.ResourceMetrics().At(b.Header))
			if err != nil {
				t.Fatal(err)
			}
			headers, processes = append(headers, h), append(processes, b.Processes)
			return nil
		})
		s := NewSender(snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{}), sink, dense)
		for k := range 2 {
			fr := s.Snapshot(time.Unix(1_700_000_500+int64(k), 0), 1)
			if _, _, err := fr.Send(context.Background(), "sdw1", []snapshot.ProcessEntry{testEntry()}, nil); err != nil {
				t.Fatal(err)
			}
			fr.Close(&snapshot.Closing{Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}}})
		}
		if len(headers) != 2 || !headers[0].Full || headers[1].Full != dense || (processes[1] > 0) != dense || headers[1].Seq != 2 {
			t.Errorf("dense %v: batches %+v with %v process resources; want the second full and holding the process only when dense", dense, headers, processes)
		}
	}
}

// A sparse batch leaves out a process whose figures did not change and
// carries one whose figures did, whichever figure (sparse batches): one figure
// moved, the process is sent again with it.
func TestSparseBatchCarriesAProcessWhoseFiguresChanged(t *testing.T) {
	var sent [][]int64 // pids of each batch, in order
	sink, _ := consumer.NewMetrics(func(_ context.Context, md pmetric.Metrics) error {
		var pids []int64
		for _, s := range decodeSamples(t, md) {
			pids = append(pids, int64(s.PID))
		}
		sent = append(sent, pids)
		return nil
	})
	s := NewSender(snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{}), sink, false)
	steady, moving := testEntry(), testEntry()
	moving.Process.PID = 101
	for k, readBytes := range []int64{0, 0, 4096} {
		moving.Process.Set(pipeline.DiskRead, 0, readBytes)
		fr := s.Snapshot(time.Unix(1_700_000_500+int64(k), 0), 1)
		if _, _, err := fr.Send(context.Background(), "sdw1", []snapshot.ProcessEntry{steady, moving}, nil); err != nil {
			t.Fatal(err)
		}
		fr.Close(&snapshot.Closing{Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}}})
	}
	if want := [][]int64{{100, 101}, nil, {101}}; !reflect.DeepEqual(sent, want) {
		t.Errorf("pids sent per snapshot %v, want %v: the full batch, none unchanged, then the one whose read bytes moved", sent, want)
	}
}

// decodeSamples reads the process samples of one process batch.
func decodeSamples(t *testing.T, md pmetric.Metrics) []snapshot.ProcessSample {
	t.Helper()
	b := snapshot.ReadBatch(md)
	var d snapshot.ProcessDecoder
	d.Decode(md.ResourceMetrics(), b.Kinds, b.Time)
	if d.Err != nil {
		t.Fatal(d.Err)
	}
	return d.Samples
}

// figureEntry is process 100 of session 7 on segment 0 with three figures.
func figureEntry(user, system float64, rss int64) snapshot.ProcessEntry {
	e := testEntry()
	e.Process.Set(pipeline.CPUUser, user, 0)
	e.Process.Set(pipeline.CPUSystem, system, 0)
	e.Process.Set(pipeline.MemoryUsage, 0, rss)
	return e
}

// sendTicks sends each tick's entries of host sdw1 through one sender
// and returns the samples each batch carried and each closing's
// departures.
func sendTicks(
	t *testing.T, enc *snapshot.ProcessEncoder, ticks ...[]snapshot.ProcessEntry,
) (samples [][]snapshot.ProcessSample, departed [][]snapshot.Departure) {
	t.Helper()
	sink, _ := consumer.NewMetrics(func(_ context.Context, md pmetric.Metrics) error {
		samples = append(samples, decodeSamples(t, md))
		return nil
	})
	s := NewSender(enc, sink, false)
	for k, entries := range ticks {
		fr := s.Snapshot(time.Unix(1_700_000_500+int64(k), 0), 1)
		if _, _, err := fr.Send(context.Background(), "sdw1", entries, nil); err != nil {
			t.Fatal(err)
		}
		c := snapshot.Closing{Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}}}
		fr.Close(&c)
		var d []snapshot.Departure
		for _, hd := range c.Departed {
			d = append(d, hd.Processes...)
		}
		departed = append(departed, d)
	}
	return samples, departed
}

// listed is the figures a sample holds.
func listed(s *snapshot.ProcessSample) []pipeline.Figure {
	var out []pipeline.Figure
	for f := range pipeline.NumFigures {
		if s.Has(f) {
			out = append(out, f)
		}
	}
	return out
}

// A process whose system CPU moved while its user CPU and memory did not
// is sent with the system CPU alone, marked sparse; its first sighting
// was whole.
func TestAChangedProcessCarriesOnlyTheFiguresThatChanged(t *testing.T) {
	enc := snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{})
	samples, _ := sendTicks(t, enc,
		[]snapshot.ProcessEntry{figureEntry(1, 2, 4096)},
		[]snapshot.ProcessEntry{figureEntry(1, 3, 4096)})
	first, second := samples[0][0], samples[1][0]
	if first.Sparse || len(listed(&first)) != 3 {
		t.Errorf("first sighting: sparse %v with %v, want whole with three figures", first.Sparse, listed(&first))
	}
	if !second.Sparse || !reflect.DeepEqual(listed(&second), []pipeline.Figure{pipeline.CPUSystem}) || second.Values[pipeline.CPUSystem] != 3e9 {
		t.Errorf("after system CPU moved: sparse %v with %v = %v, want sparse with the system CPU alone at 3 s", second.Sparse, listed(&second), second.Values)
	}
}

// A figure that is no longer read cannot be left out (left out means
// unchanged): the process goes whole, without it.
func TestAFigureThatIsNoLongerReadSendsTheProcessWhole(t *testing.T) {
	enc := snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{})
	withoutRSS := figureEntry(1, 2, 0)
	withoutRSS.Process.Values[pipeline.MemoryUsage] = snapshot.Value{}
	samples, _ := sendTicks(t, enc, []snapshot.ProcessEntry{figureEntry(1, 2, 4096)}, []snapshot.ProcessEntry{withoutRSS})
	if s := samples[1][0]; s.Sparse || !reflect.DeepEqual(listed(&s), []pipeline.Figure{pipeline.CPUUser, pipeline.CPUSystem}) {
		t.Errorf("after rss went unread: sparse %v with %v, want whole with both CPU figures", s.Sparse, listed(&s))
	}
}

// A process whose segment alone changed is sent with no figure but its
// description; one counted in another session goes whole, and the former
// (pid, session) departs.
func TestAProcessWhoseSessionOrSegmentChanged(t *testing.T) {
	enc := snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{})
	moved, resegmented := figureEntry(1, 2, 4096), figureEntry(1, 2, 4096)
	resegmented.Segment = 3
	moved.Segment, moved.Session = 3, 8
	samples, departed := sendTicks(t, enc,
		[]snapshot.ProcessEntry{figureEntry(1, 2, 4096)},
		[]snapshot.ProcessEntry{resegmented},
		[]snapshot.ProcessEntry{moved})
	if s := samples[1][0]; !s.Sparse || len(listed(&s)) != 0 || s.Segment != 3 {
		t.Errorf("segment changed: sparse %v, figures %v, segment %d; want sparse, none, 3", s.Sparse, listed(&s), s.Segment)
	}
	if s := samples[2][0]; s.Sparse || s.Session != 8 || len(listed(&s)) != 3 {
		t.Errorf("session changed: sparse %v, session %d, figures %v; want whole in session 8", s.Sparse, s.Session, listed(&s))
	}
	want := []snapshot.Departure{{Session: 7, PID: 100, Creation: testEntry().Process.CreationTime.UnixNano()}}
	if len(departed[1]) != 0 || !reflect.DeepEqual(departed[2], want) {
		t.Errorf("departures %v, want none then %v", departed, want)
	}
}

// Without gpotel.process.info nothing can mark an entry sparse: a changed
// process goes whole.
func TestWithoutProcessInfoChangedProcessesGoWhole(t *testing.T) {
	enc := snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{Metrics: map[string]snapshot.MetricSwitch{
		pipeline.MetricProcessInfo: {Off: true}}})
	samples, _ := sendTicks(t, enc,
		[]snapshot.ProcessEntry{figureEntry(1, 2, 4096)},
		[]snapshot.ProcessEntry{figureEntry(1, 3, 4096)})
	if s := samples[1][0]; len(listed(&s)) != 3 {
		t.Errorf("process.info off: the changed process carried %v, want all three figures", listed(&s))
	}
}

// What a Sender keeps per live process, measured on the heap after a
// host of 100 000 processes was sent, beside the least it can be
// (KeptBytesPerProcess).
func BenchmarkSenderMemory(b *testing.B) {
	const n = 100_000
	entries := make([]snapshot.ProcessEntry, n)
	for i := range entries {
		entries[i] = figureEntry(float64(i), 1, 4096)
		entries[i].Process.PID = int64(1000 + i)
	}
	discard, _ := consumer.NewMetrics(func(context.Context, pmetric.Metrics) error { return nil })
	var kept float64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := NewSender(snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{}), discard, false)
		fr := s.Snapshot(time.Unix(1_700_000_500, 0), 1)
		if _, _, err := fr.Send(context.Background(), "sdw1", slices.Clone(entries), nil); err != nil {
			b.Fatal(err)
		}
		fr.Close(&snapshot.Closing{Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}}})
		runtime.GC()
		runtime.ReadMemStats(&after)
		kept = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(s)
	}
	b.ReportMetric(kept, "kept-bytes/process")
	b.ReportMetric(kept/float64(KeptBytesPerProcess), "ratio-to-least")
}

// A process an agent left out as unchanged is carried only as the Sender
// last sent it: a pid it did not send, or sent in another session or with
// other attributes, is not kept, and its host closes as not answered. One
// it sent is listed this snapshot (it does not depart), unchanged. The
// Sender remembers a host only after a snapshot it answered in.
func TestKeepCarriesOnlyWhatTheSenderSentSo(t *testing.T) {
	accept, _ := consumer.NewMetrics(func(context.Context, pmetric.Metrics) error { return nil })
	s := NewSender(snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{}), accept, false)
	closeNext := func(k int64, keep ...snapshot.ProcessEntry) (*snapshot.Closing, error) {
		out := s.Snapshot(time.Unix(1_700_000_500+k, 0), 1)
		_, _, _ = out.Send(context.Background(), "sdw1", nil, nil)
		_, err := out.Keep("sdw1", keep)
		c := &snapshot.Closing{Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}}}
		out.Close(c)
		return c, err
	}
	first := s.Snapshot(time.Unix(1_700_000_500, 0), 1)
	if first.Remembers("sdw1") {
		t.Fatal("a host never sent is remembered")
	}
	_, _, _ = first.Send(context.Background(), "sdw1", []snapshot.ProcessEntry{testEntry()}, nil)
	first.Close(&snapshot.Closing{Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}}})

	kept := testEntry()
	kept.Process = snapshot.Process{PID: kept.Process.PID}
	c, err := closeNext(1, kept)
	if err != nil || len(c.Departed) != 0 || !c.Hosts[0].Up {
		t.Fatalf("pid 100 kept: err %v, departed %v, up %v; want it carried", err, c.Departed, c.Hosts[0].Up)
	}
	for name, e := range map[string]snapshot.ProcessEntry{
		"never sent":        {Session: 7, Process: snapshot.Process{PID: 101}},
		"another session":   {Session: 8, Process: snapshot.Process{PID: 100}},
		"another segment":   {Session: 7, Segment: 3, Process: snapshot.Process{PID: 100}},
		"another back type": {Session: 7, BackendType: "autovacuum worker", Process: snapshot.Process{PID: 100}},
	} {
		c, err := closeNext(2, e)
		var notKept ErrNotKept
		if !errors.As(err, &notKept) || c.Hosts[0].Up {
			t.Errorf("%s: err %v, up %v; want not kept and the host not answered", name, err, c.Hosts[0].Up)
		}
		// The host is forgotten: sent in full next, and remembered after.
		out := s.Snapshot(time.Unix(1_700_000_600, 0), 1)
		if out.Remembers("sdw1") {
			t.Errorf("%s: the host is remembered after it did not answer", name)
		}
		_, _, _ = out.Send(context.Background(), "sdw1", []snapshot.ProcessEntry{testEntry()}, nil)
		out.Close(&snapshot.Closing{Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}}})
	}
}

// carrySnapshot is one snapshot of host sdw1 asked about pids (in session
// 7) whose agent leaves out what did not change: it sends changed, and, if
// the Sender carries the host as a whole, the rest as left out but gone;
// else it keeps them one by one. It returns whether the host was carried
// and the closing batch.
func carrySnapshot(t *testing.T, s *Sender, k int64, pids []int64, changed []snapshot.ProcessEntry, gone []int64) (bool, *snapshot.Closing) {
	t.Helper()
	out := s.Snapshot(time.Unix(1_700_000_500+k, 0), 1)
	l := out.NewListing()
	for _, pid := range pids {
		l.Add(pid, 7, 0, "", false)
	}
	carried := out.Carries("sdw1", l.Sum64(), true)
	if _, _, err := out.Send(context.Background(), "sdw1", changed, nil); err != nil {
		t.Fatal(err)
	}
	listed := map[int64]bool{}
	for _, e := range changed {
		listed[e.Process.PID] = true
	}
	for _, pid := range gone {
		listed[pid] = true
	}
	var err error
	if carried {
		_, err = out.Carry("sdw1", len(pids)-len(listed), gone)
	} else if out.Remembers("sdw1") {
		var keep []snapshot.ProcessEntry
		for _, pid := range pids {
			if !listed[pid] {
				keep = append(keep, snapshot.ProcessEntry{Session: 7, Process: snapshot.Process{PID: pid}})
			}
		}
		_, err = out.Keep("sdw1", keep)
	}
	if err != nil {
		t.Fatalf("snapshot %d: %v", k, err)
	}
	c := &snapshot.Closing{Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}}}
	out.Close(c)
	return carried, c
}

func pidEntry(pid int64, user float64) snapshot.ProcessEntry {
	e := testEntry()
	e.Process.PID = pid
	e.Process.Set(pipeline.CPUUser, user, 0)
	return e
}

func departedPIDs(c *snapshot.Closing) []int64 {
	var out []int64
	for _, h := range c.Departed {
		for _, d := range h.Processes {
			out = append(out, d.PID)
		}
	}
	return out
}

// A host asked about the same processes as at its last snapshot has its
// unchanged processes carried as a whole; one of them still departs
// exactly when its agent says it is gone, or when it is no longer asked
// about, and the others stay.
func TestACarriedProcessDepartsExactlyWhenItDeparts(t *testing.T) {
	accept, _ := consumer.NewMetrics(func(context.Context, pmetric.Metrics) error { return nil })
	s := NewSender(snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{}), accept, false)
	all := []int64{100, 101, 102}
	steps := []struct {
		pids     []int64
		changed  []snapshot.ProcessEntry
		gone     []int64
		carried  bool
		departed []int64
	}{
		{all, []snapshot.ProcessEntry{pidEntry(100, 1), pidEntry(101, 1), pidEntry(102, 1)}, nil, false, nil},
		{all, []snapshot.ProcessEntry{pidEntry(100, 2)}, nil, true, nil},
		{all, nil, nil, true, nil},
		{all, nil, []int64{101}, true, []int64{101}},
		{[]int64{100, 102}, nil, nil, false, nil},
		{[]int64{100, 102}, nil, nil, true, nil},
		{[]int64{100}, nil, nil, false, []int64{102}},
		{[]int64{100}, []snapshot.ProcessEntry{pidEntry(100, 3)}, nil, true, nil},
	}
	for k, st := range steps {
		carried, c := carrySnapshot(t, s, int64(k), st.pids, st.changed, st.gone)
		if carried != st.carried || !c.Hosts[0].Up || !slices.Equal(departedPIDs(c), st.departed) {
			t.Errorf("snapshot %d: carried %v, up %v, departed %v; want carried %v, up, departed %v",
				k, carried, c.Hosts[0].Up, departedPIDs(c), st.carried, st.departed)
		}
	}
}

// A host that did not answer (a lost or refused answer) is not carried:
// its next snapshot is full, asked about the same processes or not, and
// the carry starts again after it. Left out processes that do not add up
// to what the Sender holds close the host as not answered.
func TestAFullAnswerAfterALostOneResetsTheCarry(t *testing.T) {
	accept, _ := consumer.NewMetrics(func(context.Context, pmetric.Metrics) error { return nil })
	s := NewSender(snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{}), accept, false)
	pids := []int64{100, 101}
	whole := []snapshot.ProcessEntry{pidEntry(100, 1), pidEntry(101, 1)}
	carrySnapshot(t, s, 0, pids, whole, nil)
	if carried, _ := carrySnapshot(t, s, 1, pids, nil, nil); !carried {
		t.Fatal("the same listing after a full snapshot is not carried")
	}
	lost := s.Snapshot(time.Unix(1_700_000_502, 0), 1)
	l := lost.NewListing()
	for _, pid := range pids {
		l.Add(pid, 7, 0, "", false)
	}
	lost.Carries("sdw1", l.Sum64(), true)
	lost.Close(&snapshot.Closing{Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: false}}})
	if carried, _ := carrySnapshot(t, s, 3, pids, whole, nil); carried {
		t.Error("the snapshot after one the host did not answer in is carried, want it full")
	}
	if carried, c := carrySnapshot(t, s, 4, pids, nil, nil); !carried || !c.Hosts[0].Up {
		t.Errorf("after the full snapshot: carried %v, up %v; want carried again", carried, c.Hosts[0].Up)
	}

	out := s.Snapshot(time.Unix(1_700_000_505, 0), 1)
	l = out.NewListing()
	for _, pid := range pids {
		l.Add(pid, 7, 0, "", false)
	}
	if !out.Carries("sdw1", l.Sum64(), true) {
		t.Fatal("not carried")
	}
	if _, err := out.Carry("sdw1", 3, nil); err != nil { // one more left out than held
		t.Fatal(err)
	}
	c := &snapshot.Closing{Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}}}
	out.Close(c)
	if c.Hosts[0].Up {
		t.Error("a host with more left out than the Sender holds closes as answered")
	}
	if carried, _ := carrySnapshot(t, s, 6, pids, whole, nil); carried {
		t.Error("the snapshot after left out processes that did not add up is carried, want it full")
	}
}
