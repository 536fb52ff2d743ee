// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package await

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	Until(t, "the third look", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("looked %d times, want 3", n)
	}
}

func TestPollReportsTheLastErrorWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	looks := 0
	err := Poll(ctx, func() error {
		looks++
		if looks == 2 {
			cancel()
		}
		return fmt.Errorf("look %d failed", looks)
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want it to wrap context.Canceled", err)
	}
	var last interface{ Unwrap() []error }
	if !errors.As(err, &last) || last.Unwrap()[1].Error() != fmt.Sprintf("look %d failed", looks) {
		t.Fatalf("err %v does not carry the last check's error", err)
	}
}

func TestDeadlineLeavesAtLeastAMinute(t *testing.T) {
	if d := time.Until(Deadline(t)); d < minimum-time.Second {
		t.Fatalf("a wait may give up after %v, want at least %v", d, minimum)
	}
}

type deadlineTB struct {
	testing.TB
	at time.Time
}

func (d deadlineTB) Deadline() (time.Time, bool) { return d.at, true }

func TestDeadlineStopsBeforeTheTestBinarysDeadline(t *testing.T) {
	far := time.Now().Add(time.Hour)
	if got := Deadline(deadlineTB{TB: t, at: far}); !got.Before(far) || got.Before(far.Add(-time.Minute)) {
		t.Fatalf("deadline %v, want shortly before %v", got, far)
	}
}
