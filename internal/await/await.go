// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package await lets tests wait for a condition bounded by the test's own
// deadline instead of a short fixed timer, so that they pass on a loaded
// machine as well as on a quiet one.
package await

import (
	"context"
	"testing"
	"time"
)

const (
	// fallback bounds a wait when the test has no deadline (go test -timeout 0, benchmarks).
	fallback = 10 * time.Minute
	// grace is left before the test binary's deadline to report the failure and clean up.
	grace = 20 * time.Second
	// minimum keeps a wait meaningful when a test starts close to its binary's deadline.
	minimum = 60 * time.Second
	// maxPoll is the longest pause between two looks at a condition.
	maxPoll = 500 * time.Millisecond
)

// Deadline is when a wait in t gives up: shortly before the test's own
// deadline, and at least a minute from now.
func Deadline(t testing.TB) time.Time {
	limit := time.Now().Add(fallback)
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			limit = d.Add(-grace)
		}
	}
	if floor := time.Now().Add(minimum); limit.Before(floor) {
		limit = floor
	}
	return limit
}

// Context is a context that ends at Deadline(t) and is cancelled when t ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), Deadline(t))
	t.Cleanup(cancel)
	return ctx
}

// Until looks at cond, more and more slowly, until it holds; at the deadline
// it fails the test naming what it waited for.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if err := Poll(Context(t), func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}); err != nil {
		t.Fatalf("gave up waiting for %s: %v", what, err)
	}
}

// NoError is Until for a check that explains itself: it waits until check
// returns nil and, at the deadline, fails with the last error check gave.
func NoError(t testing.TB, what string, check func() error) {
	t.Helper()
	if err := Poll(Context(t), check); err != nil {
		t.Fatalf("gave up waiting for %s: %v", what, err)
	}
}

// Poll runs check until it returns nil or ctx ends; then it returns check's
// last error joined with the context's.
func Poll(ctx context.Context, check func() error) error {
	pause := 10 * time.Millisecond
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return &timeoutError{last: err, cause: ctx.Err()}
		case <-time.After(pause):
		}
		pause = min(2*pause, maxPoll)
	}
}

type notYet struct{}

func (notYet) Error() string { return "condition not met" }

var errNotYet error = notYet{}

type timeoutError struct{ last, cause error }

func (e *timeoutError) Error() string { return e.cause.Error() + "; last check: " + e.last.Error() }
func (e *timeoutError) Unwrap() []error {
	return []error{e.cause, e.last}
}
