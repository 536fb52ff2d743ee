// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/benchmeter"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// benchSnapshot is 10 000 sessions each running one query, with 20
// processes apiece (the coordinator backend and 19 executors on 8 segment
// hosts): 200 000 processes. Users are 50, one session in ten spills.
func benchSnapshot(sec float64) pipelinetest.Snapshot {
	const sessions, executors = 10000, 19
	s := pipelinetest.Snapshot{Time: at(sec), TmID: 1700000000, Coordinator: "mdw", Hosts: []pipelinetest.Host{{Name: "mdw", Up: true}}}
	for h := range 8 {
		s.Hosts = append(s.Hosts, pipelinetest.Host{Name: fmt.Sprintf("sdw%d", h+1), Up: true})
	}
	for i := range int64(sessions) {
		id := i + 1
		ses := pipelinetest.Session{ID: id, PID: 100000 + id, DB: "sales", User: fmt.Sprintf("user%02d", i%50), State: "active",
			QueryStart: at(0), BackendStart: at(-10), Query: "select 1"}
		if i%10 == 0 {
			ses.Greenplum = &snapshot.GreenplumSession{Spill: []snapshot.Spill{{Segment: 0, CommandCount: 1, Bytes: (i % 7) << 30, Files: 3}}}
		}
		s.Sessions = append(s.Sessions, ses)
		s.Processes = append(s.Processes, pipelinetest.Process{Host: "mdw", Segment: -1, Session: id, PID: 100000 + id, Created: at(-10),
			CPUUser: 0.01 * sec, CommandCount: 1})
		for k := range int64(executors) {
			s.Processes = append(s.Processes, pipelinetest.Process{Host: fmt.Sprintf("sdw%d", k%8+1), Segment: k, Session: id,
				PID: 200000 + id*executors + k, Created: at(-1), CPUUser: float64(i%13) * sec / 10, ReadBytes: int64(sec) << 20,
				RunDelay: float64(i%5) * sec / 20, DiskDelay: 0.01 * sec, RSS: 64 << 20, CommandCount: 1})
		}
	}
	return s
}

// benchRules are 25 rules of the five kinds docs/operations.md shows,
// five of each with other thresholds and users.
func benchRules() []RuleConfig {
	var rules []RuleConfig
	for i := range 5 {
		users := []string{fmt.Sprintf("user%02d", i), fmt.Sprintf("user%02d", i+10)}
		rules = append(rules,
			RuleConfig{Name: fmt.Sprintf("spill-%d", i), When: []string{fmt.Sprintf("gpotel.query.spill.size > %dGiB", i+1)}, For: time.Minute,
				Action: "cancel", Mode: "enforce", MaxMatches: 1000, MaxActionsPerMinute: 600},
			RuleConfig{Name: fmt.Sprintf("skew-%d", i), Scope: ScopeConfig{Users: users},
				When: []string{"gpotel.query.cpu.time > 1s", fmt.Sprintf("gpotel.query.skew.max_over_avg > %d", i+2)}, Action: "log"},
			RuleConfig{Name: fmt.Sprintf("idle-tx-%d", i), When: []string{fmt.Sprintf("gpotel.session.idle_in_transaction.time > %dm", 5+i)},
				Action: "terminate", Mode: "enforce"},
			RuleConfig{Name: fmt.Sprintf("cpu-hog-%d", i), Scope: ScopeConfig{ExcludeUsers: users},
				When:   []string{fmt.Sprintf("gpotel.session.cpu.run_delay.share > 0.%d", i+1), "gpotel.session.cpu.time.rate > 1", "gpotel.session.hosts.pressure.cpu > 0.2"},
				Action: "cancel", MaxMatches: 100000, MaxActionsPerMinute: 600},
			RuleConfig{Name: fmt.Sprintf("long-%d", i), Scope: ScopeConfig{Users: users, ExcludeDatabases: []string{"gpperfmon"}},
				When: []string{fmt.Sprintf("gpotel.query.duration > %dm", i+1)}, Action: "move", ResourceGroup: "small", MaxMatches: 100000, MaxActionsPerMinute: 600})
	}
	return rules
}

// processorOutput is the real processor's output for the benchmark's
// second snapshot (the first gives the window its start).
func processorOutput(b *testing.B) pmetric.Metrics {
	return processed(b, benchSnapshot(300), benchSnapshot(330))
}

// BenchmarkRules: 25 rules over 10 000 running queries of 200 000
// processes. It reports the rules' evaluation of one decoded snapshot
// (CPU of the benchmark's thread, and allocations) and, as the reference
// in the same run, the connector's decoding of the processor's output for
// it, and their ratio.
func BenchmarkRules(b *testing.B) {
	md := processorOutput(b)
	cfg := defaultConfig()
	cfg.Dialect, cfg.Window, cfg.Rules = dialect.GP7, time.Minute, benchRules()
	withActionConnection(cfg)
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	var rules []*rule
	for i := range cfg.Rules {
		r, _ := cfg.compile(&cfg.Rules[i])
		rules = append(rules, r)
	}
	reader, e := newViewReader(decodeEverything, cfg.Window, cfg.Superusers), newEngine(rules)
	var v view
	if !reader.read(md, &v) || len(v.targets) != 10000 {
		b.Fatalf("decoded %d targets, want 10000", len(v.targets))
	}
	fired := 0
	for range 3 { // past the first firings: the steady state
		fired += len(e.evaluate(&v).firings)
	}
	allocs := testing.AllocsPerRun(10, func() { e.evaluate(&v) })
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	var evaluate, decode time.Duration
	for range b.N {
		start := benchmeter.ThreadCPU()
		e.evaluate(&v)
		evaluate += benchmeter.ThreadCPU() - start
		start = benchmeter.ThreadCPU()
		reader.read(md, &v)
		decode += benchmeter.ThreadCPU() - start
	}
	b.ReportMetric(float64(evaluate.Nanoseconds())/float64(b.N), "evaluate-cpu-ns/snapshot")
	b.ReportMetric(allocs, "evaluate-allocs/snapshot")
	b.ReportMetric(float64(decode.Nanoseconds())/float64(b.N), "decode-cpu-ns/snapshot-reference")
	b.ReportMetric(float64(evaluate)/float64(decode), "evaluate/decode")
	b.ReportMetric(float64(fired), "firings-first-3")
}
