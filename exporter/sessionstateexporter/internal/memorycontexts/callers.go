// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memorycontexts

import (
	"context"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/peer"

	"github.com/gpotel/gpotel/internal/clientname"
)

// maxTrackedCallers bounds the callers callerBuckets keeps a bucket for;
// past it, callers it has no bucket for share one.
const maxTrackedCallers = 1024

// callerBuckets is a token bucket per caller: at most burst requests at
// once, then r a second, for each.
type callerBuckets struct {
	r     rate.Limit
	burst int

	mu       sync.Mutex
	byCaller map[string]*rate.Limiter
	// shared is the bucket of every caller beyond maxTrackedCallers.
	shared *rate.Limiter
}

func newCallerBuckets(r float64, burst int) *callerBuckets {
	return &callerBuckets{r: rate.Limit(r), burst: burst, byCaller: map[string]*rate.Limiter{}, shared: rate.NewLimiter(rate.Limit(r), burst)}
}

// take takes a token of caller's bucket at now; when there is none, it
// says how long until there is.
func (b *callerBuckets) take(caller string, now time.Time) (time.Duration, bool) {
	l := b.bucketOf(caller, now)
	r := l.ReserveN(now, 1)
	if wait := r.DelayFrom(now); !r.OK() || wait > 0 {
		r.CancelAt(now)
		return wait, false
	}
	return 0, true
}

func (b *callerBuckets) bucketOf(caller string, now time.Time) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.byCaller[caller]; ok {
		return l
	}
	if len(b.byCaller) >= maxTrackedCallers {
		// A full bucket remembers nothing a new one would not.
		for c, l := range b.byCaller {
			if l.TokensAt(now) >= float64(b.burst) {
				delete(b.byCaller, c)
			}
		}
		if len(b.byCaller) >= maxTrackedCallers {
			return b.shared
		}
	}
	l := rate.NewLimiter(b.r, b.burst)
	b.byCaller[caller] = l
	return l
}

// callerOf names who calls: its verified client certificate, else the
// address it calls from (every reader shares the bearer token).
func callerOf(ctx context.Context) string {
	if c := clientname.Verified(ctx); c != nil {
		if names := clientname.Names(c); len(names) > 0 {
			return "certificate " + names[0]
		}
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		if host, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
			return "address " + host
		}
		return "address " + p.Addr.String()
	}
	return "unknown caller"
}
