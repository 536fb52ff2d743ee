// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gpotel/gpotel/segmentagent/internal/proctest"
)

// BenchmarkCgroupCost is what host pressure and the processes' groups add to
// a 1000-pid in-process call on real processes: the same request answered
// by a service with cgroups on and one with cgroups.disabled, calls
// alternating (which goes first alternates too) so both meet the same load.
func BenchmarkCgroupCost(b *testing.B) {
	const calls = 10
	pids := proctest.SpawnSleepers(b, 1000)
	cfg := ServiceConfig{AllowedUsers: []string{strconv.Itoa(os.Getuid())}, PostmasterPidFiles: []string{proctest.SelfAsPostmaster(b)}}
	with, err := NewService(cfg, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Cgroups.Disabled = true
	without, err := NewService(cfg, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	req := request(pids...)
	ctx := context.Background()
	call := func(s *Service, total *time.Duration) int {
		start := time.Now()
		resp, err := s.GetPidProcStat(ctx, req)
		*total += time.Since(start)
		if err != nil || resp.GetSummary().GetAnswered() != int64(len(pids)) {
			b.Fatalf("%v, %v", err, resp.GetSummary())
		}
		return len(resp.GetControlGroups())
	}
	var on, off time.Duration
	groups := 0
	b.ResetTimer()
	for i := range b.N * calls {
		if i%2 == 0 {
			groups = call(with, &on)
			call(without, &off)
		} else {
			call(without, &off)
			groups = call(with, &on)
		}
	}
	b.StopTimer()
	n := float64(b.N * calls * len(pids))
	b.ReportMetric(float64(on.Nanoseconds())/n, "cgroups-ns/pid")
	b.ReportMetric(float64(off.Nanoseconds())/n, "off-ns/pid")
	b.ReportMetric(float64(on)/float64(off), "x-off")
	b.Logf("1000 real processes in %d group(s), %d calls each: cgroups on %.0f ns/pid, off %.0f ns/pid, ratio %.2f",
		groups, b.N*calls, float64(on.Nanoseconds())/n, float64(off.Nanoseconds())/n, float64(on)/float64(off))
}
