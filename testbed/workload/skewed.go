package workload

import (
	"context"
	"time"
)

// SkewedCPU is a query whose rows all live on one segment: the backend of
// Spec.HotContent burns CPU while the session's other segment backends
// (and the coordinator's) hold their connections and wait, as the
// executors of the segments without rows do.
const SkewedCPU Kind = "skewed_cpu"

// skewedCPU runs one backend's part of a skewed query.
func (s *Session) skewedCPU(ctx context.Context, b *backend) error {
	if b.content == s.spec.HotContent {
		return burnCPU(ctx, b, s.until)
	}
	t := time.NewTimer(time.Until(s.until))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
