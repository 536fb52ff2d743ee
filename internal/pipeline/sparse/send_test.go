// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sparse

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// testEntry is process 100 of session 7.
func testEntry() pipeline.ProcessEntry {
	p := pipeline.Process{PID: 100, CreationTime: time.Unix(1_700_000_000, 0), HasStat: true}
	p.Set(pipeline.CPUUser, 1.5, 0)
	return pipeline.ProcessEntry{Session: 7, Process: p}
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
	fr := NewSender(pipeline.NewProcessEncoder(pipeline.Scope{}, pipeline.Switches{}), f, false).Snapshot(time.Unix(1_700_000_500, 0), 1)
	for _, h := range []string{"sdw1", "sdw2"} {
		_, _, err := fr.Send(context.Background(), h, []pipeline.ProcessEntry{testEntry()}, nil)
		if (err != nil) != (h == "sdw2") {
			t.Fatalf("%s: send error %v", h, err)
		}
	}
	c := pipeline.Closing{Hosts: []pipeline.HostAnswer{{Host: "sdw1", Up: true}, {Host: "sdw2", Up: true}}}
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
		var headers []pipeline.BatchHeader
		var processes []int
		sink, _ := consumer.NewMetrics(func(_ context.Context, md pmetric.Metrics) error {
			b := pipeline.ReadBatch(md)
			h, err := pipeline.DecodeBatchHeader(md.ResourceMetrics().At(b.Header))
			if err != nil {
				t.Fatal(err)
			}
			headers, processes = append(headers, h), append(processes, b.Processes)
			return nil
		})
		s := NewSender(pipeline.NewProcessEncoder(pipeline.Scope{}, pipeline.Switches{}), sink, dense)
		for k := range 2 {
			fr := s.Snapshot(time.Unix(1_700_000_500+int64(k), 0), 1)
			if _, _, err := fr.Send(context.Background(), "sdw1", []pipeline.ProcessEntry{testEntry()}, nil); err != nil {
				t.Fatal(err)
			}
			fr.Close(&pipeline.Closing{Hosts: []pipeline.HostAnswer{{Host: "sdw1", Up: true}}})
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
	s := NewSender(pipeline.NewProcessEncoder(pipeline.Scope{}, pipeline.Switches{}), sink, false)
	steady, moving := testEntry(), testEntry()
	moving.Process.PID = 101
	for k, readBytes := range []int64{0, 0, 4096} {
		moving.Process.Set(pipeline.DiskRead, 0, readBytes)
		fr := s.Snapshot(time.Unix(1_700_000_500+int64(k), 0), 1)
		if _, _, err := fr.Send(context.Background(), "sdw1", []pipeline.ProcessEntry{steady, moving}, nil); err != nil {
			t.Fatal(err)
		}
		fr.Close(&pipeline.Closing{Hosts: []pipeline.HostAnswer{{Host: "sdw1", Up: true}}})
	}
	if want := [][]int64{{100, 101}, nil, {101}}; !reflect.DeepEqual(sent, want) {
		t.Errorf("pids sent per snapshot %v, want %v: the full batch, none unchanged, then the one whose read bytes moved", sent, want)
	}
}

// decodeSamples reads the process samples of one process batch.
func decodeSamples(t *testing.T, md pmetric.Metrics) []pipeline.ProcessSample {
	t.Helper()
	b := pipeline.ReadBatch(md)
	var d pipeline.ProcessDecoder
	d.Decode(md.ResourceMetrics(), b.Kinds, b.Time)
	if d.Err != nil {
		t.Fatal(d.Err)
	}
	return d.Samples
}
