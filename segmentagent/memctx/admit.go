// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// pidLimiter allows one request per pid at a time and one per interval.
// Only pids already found to be backends of a served instance come here,
// so a caller naming pids at random leaves nothing behind.
type pidLimiter struct {
	interval time.Duration

	mu    sync.Mutex
	busy  map[int64]bool
	asked map[int64]time.Time
	// order holds the admissions oldest first; as every one lasts the same
	// interval, they expire from its front, each in O(1).
	order []admission
}

type admission struct {
	pid int64
	at  time.Time
}

func newPIDLimiter(interval time.Duration) *pidLimiter {
	return &pidLimiter{interval: interval, busy: map[int64]bool{}, asked: map[int64]time.Time{}}
}

// admit takes pid at now, or says why not.
func (l *pidLimiter) admit(pid int64, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(now)
	if l.busy[pid] {
		return status.Errorf(codes.ResourceExhausted, "pid %d: another memory-context request for it is in flight", pid)
	}
	if last, ok := l.asked[pid]; ok {
		return status.Errorf(codes.ResourceExhausted, "pid %d was asked %s ago; at most one request per pid every %s (min_interval)",
			pid, now.Sub(last).Round(time.Millisecond), l.interval)
	}
	l.busy[pid] = true
	if l.interval > 0 {
		l.asked[pid] = now
		l.order = append(l.order, admission{pid, now})
	}
	return nil
}

// expire forgets the admissions older than the interval.
func (l *pidLimiter) expire(now time.Time) {
	n := 0
	for n < len(l.order) && now.Sub(l.order[n].at) >= l.interval {
		if a := l.order[n]; l.asked[a.pid].Equal(a.at) {
			delete(l.asked, a.pid)
		}
		n++
	}
	l.order = l.order[n:]
}

func (l *pidLimiter) release(pid int64) {
	l.mu.Lock()
	delete(l.busy, pid)
	l.mu.Unlock()
}

// tracked is how many pids the limiter remembers.
func (l *pidLimiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.asked) + len(l.busy)
}
