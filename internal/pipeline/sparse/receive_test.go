// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sparse

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

func header(seq uint64, full bool) snapshot.BatchHeader {
	return snapshot.BatchHeader{Host: "sdw1", TmID: 1, Seq: seq, Full: full}
}

// A host's first batch must be full; the next ones follow its number, of
// the same kind within a snapshot; a gap refuses the batch and every
// sparse one after it, until a full batch starts the host again.
func TestSequenceRefusesABatchThatDoesNotFollow(t *testing.T) {
	var q Sequence
	q.AddHost()
	q.Begin()
	var due ErrFullBatchDue
	if err := q.Accept(0, header(1, false)); !errors.As(err, &due) || due.Expected != 0 {
		t.Fatalf("a first sparse batch: %v, want a full batch due", err)
	}
	q.Begin()
	for _, h := range []snapshot.BatchHeader{header(2, true), header(3, true)} {
		if err := q.Accept(0, h); err != nil {
			t.Fatalf("batch %d: %v", h.Seq, err)
		}
	}
	if err := q.Accept(0, header(4, false)); err == nil {
		t.Fatal("a sparse batch after full ones in one snapshot accepted")
	}
	q.Begin()
	if err := q.Accept(0, header(6, false)); err == nil {
		t.Fatal("batch 6 accepted after batch 4 was refused")
	}
	q.Begin()
	if err := q.Accept(0, header(7, true)); err != nil {
		t.Fatalf("a full batch after a refused one: %v", err)
	}
	if err := q.Accept(0, header(9, true)); !errors.As(err, &due) || due.Expected != 8 {
		t.Fatalf("batch 9 after 7: %v, want batch 8 due", err)
	}
}

// The closing batch's count and last number settle the host: a complete
// sparse run is answered and carries its unlisted processes, except the
// departed ones; a full run carries none; a run short of a batch is not
// answered, counted, and a full batch is due.
func TestSequenceSettlesAHostByItsBatches(t *testing.T) {
	var q Sequence
	q.AddHost()
	q.Begin()
	_ = q.Accept(0, header(1, true))
	if !q.Answered(0, &snapshot.HostAnswer{Host: "sdw1", Up: true, Batches: 1, Sequence: 1}) || q.Carries(0, 5) {
		t.Fatal("a complete full run: want answered, nothing carried")
	}
	q.Begin()
	_ = q.Accept(0, header(2, false))
	_ = q.Accept(0, header(3, false))
	q.Depart(6)
	if !q.Answered(0, &snapshot.HostAnswer{Host: "sdw1", Up: true, Batches: 2, Sequence: 3}) || !q.Carries(0, 5) || q.Carries(0, 6) {
		t.Fatal("a complete sparse run: want answered, process 5 carried, departed 6 not")
	}
	q.Begin()
	_ = q.Accept(0, header(4, false))
	if q.Answered(0, &snapshot.HostAnswer{Host: "sdw1", Up: true, Batches: 2, Sequence: 5}) || q.Unaccounted != 1 || q.Carries(0, 5) {
		t.Fatalf("a run short of batch 5: want not answered and counted (%d), nothing carried", q.Unaccounted)
	}
	q.Begin()
	if err := q.Accept(0, header(6, false)); err == nil {
		t.Fatal("a sparse batch accepted after a run that did not add up")
	}
	q.Begin()
	_ = q.Accept(0, header(7, true))
	_ = q.Accept(0, header(8, true))
	if q.Answered(0, &snapshot.HostAnswer{Host: "sdw1", Up: true, Batches: 2, Sequence: 9}) {
		t.Fatal("two batches ending at 8 taken for the two the closing batch says end at 9")
	}
}

// A host whose batches came but that the closing batch does not list is
// not known to have answered, and needs a full batch; one that sent
// nothing is not reported.
func TestSequenceReportsAHostWithBatchesButNoAnswer(t *testing.T) {
	var q Sequence
	q.AddHost()
	q.AddHost()
	q.Begin()
	_ = q.Accept(0, header(1, true))
	if !q.Unlisted(0) || q.Unlisted(1) {
		t.Fatal("want host 0 reported, host 1 (no batch) not")
	}
	q.Begin()
	if err := q.Accept(0, header(2, false)); err == nil {
		t.Fatal("a sparse batch accepted after an unlisted run")
	}
}

// The two halves agree: what a Sender sends and stamps, a Sequence
// accepts and settles. Batches lost on the way make the host not
// answered; its next sparse batch is refused, which the Sender hears of,
// so that the host closes as not answered again and its next batch,
// full, is accepted.
func TestSenderAndSequenceAgree(t *testing.T) {
	var q Sequence
	q.AddHost()
	lose := false
	var refused []uint64
	sink, _ := consumer.NewMetrics(func(_ context.Context, md pmetric.Metrics) error {
		b := snapshot.ReadBatch(md)
		h, err := snapshot.DecodeBatchHeader(md.ResourceMetrics().At(b.Header))
		if err != nil {
			t.Fatal(err)
		}
		if lose {
			return nil // lost after the receiver was told it went through
		}
		err = q.Accept(0, h)
		if err != nil {
			refused = append(refused, h.Seq)
		}
		return err
	})
	s := NewSender(snapshot.NewProcessEncoder(snapshot.Scope{}, snapshot.Switches{}), sink, false)
	var answered []bool
	for k, lost := range []bool{false, false, true, false, false} {
		q.Begin()
		lose = lost
		out := s.Snapshot(time.Unix(1_700_000_500+int64(k), 0), 1)
		for range 2 {
			_, _, _ = out.Send(context.Background(), "sdw1", []snapshot.ProcessEntry{testEntry()}, nil)
		}
		c := snapshot.Closing{Hosts: []snapshot.HostAnswer{{Host: "sdw1", Up: true}}}
		out.Close(&c)
		answered = append(answered, q.Answered(0, &c.Hosts[0]))
	}
	if len(refused) != 2 || refused[0] != 7 || refused[1] != 8 {
		t.Errorf("batches refused %v, want 7 and 8: the sparse ones after the lost snapshot", refused)
	}
	if want := []bool{true, true, false, false, true}; !slices.Equal(answered, want) {
		t.Errorf("answered per snapshot %v, want %v: the lost snapshot and the sparse one after it not, the full one after that again", answered, want)
	}
}
