// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/e2e"
)

// defaultOTLPMaxBytes bounds the demo's OTLP file, which grows by tens of
// megabytes a minute (docs/performance.md): the file and its .1 keep the
// last minutes in at most twice this.
const defaultOTLPMaxBytes = 64 << 20

func init() {
	register(subcommand{name: "demo", summary: "run gpotel whole on a new testbed with a workload; print where its output goes", run: runDemo})
}

func runDemo(ctx context.Context, args []string) error {
	var (
		dir, out, dialectName, api, config, collectorBin, agentBin string
		duration                                                   time.Duration
		otlpMax                                                    int64
		opts                                                       cluster.Options
		history, rules                                             bool
	)
	fs := newFlags("demo", &dir, false)
	fs.DurationVar(&duration, "duration", 0, "stop after this long (0: run until SIGINT/SIGTERM)")
	fs.StringVar(&out, "out", "", "directory for the collector and agent logs and the OTLP output (kept); empty means a new temporary directory")
	fs.IntVar(&opts.Hosts, "hosts", 2, "emulated segment hosts (sdw1..sdwN)")
	fs.IntVar(&opts.SegmentsPerHost, "segments-per-host", 2, "primary segments per host")
	fs.StringVar(&dialectName, "dialect", string(dialect.GP6), "gp6, gp7 or cloudberry")
	fs.StringVar(&api, "api", "127.0.0.1:1432", "where the collector serves GetGPInfo")
	fs.StringVar(&config, "config", "config/testbed.yaml", "collector configuration")
	fs.StringVar(&collectorBin, "collector", "build/otelcol-gpotel", "the ocb-built collector (make collector)")
	fs.StringVar(&agentBin, "agent", "build/gpotel-agent", "the agent binary (make agent)")
	fs.Int64Var(&otlpMax, "otlp-max-bytes", defaultOTLPMaxBytes, "bound of the OTLP file: past it, it moves to .1 (replacing that) and starts again; 0: no bound")
	fs.BoolVar(&history, "history", false, "also write the finished-work events into database gpotel_history of the coordinator (config/history.yaml)")
	fs.BoolVar(&rules, "rules", false, "also run the workload rules of config/rules.yaml, their firings into gpotel_history.rule_actions (needs --history; "+
		"the enforcing rule acts as role gpotel_actions, which scripts/run.sh creates)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if duration < 0 {
		return errors.New("--duration must not be negative")
	}
	if otlpMax < 0 {
		return errors.New("--otlp-max-bytes must not be negative")
	}
	if rules && !history {
		return errors.New("--rules writes its firings into the history: add --history")
	}
	opts.Dir = dir
	opts.Dialect = dialect.Dialect(dialectName)
	if !opts.Dialect.Greenplum() {
		return fmt.Errorf("--dialect %q: the demo's config expects a segmented cluster, gp6, gp7 or cloudberry", dialectName)
	}
	historyConfig, rulesConfig := "config/history.yaml", "config/rules.yaml"
	files := map[string]*string{"--config": &config, "--collector": &collectorBin, "--agent": &agentBin, "--history": &historyConfig, "--rules": &rulesConfig}
	for flagName, path := range files {
		resolved, err := repoFile(*path)
		if err != nil {
			return fmt.Errorf("%s: %w (run `make build` first)", flagName, err)
		}
		*path = resolved
	}
	if out == "" {
		var err error
		if out, err = os.MkdirTemp("", "gpotel-demo-"); err != nil {
			return err
		}
	}
	c, err := cluster.Up(ctx, opts)
	if err != nil {
		return err
	}
	// Teardown runs on its own clock: ctx is already done after SIGINT or --duration.
	teardown := func() error {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		return c.Down(tctx)
	}
	emit(map[string]any{"event": "testbed", "id": c.ID, "dir": c.Dir, "coordinator_dsn": c.CoordinatorDSN,
		"hosts": len(c.Hosts) - 1, "segments": len(c.Segments), "dialect": c.Dialect})

	var collectorArgs []string
	if history {
		if err := c.CreateHistoryDatabase(ctx); err != nil {
			return errors.Join(fmt.Errorf("history database: %w", err), teardown())
		}
		collectorArgs = append(collectorArgs, "--config", historyConfig)
	}
	if rules {
		collectorArgs = append(collectorArgs, "--config", rulesConfig, "--set=connectors::workloadrules::dialect="+string(c.Dialect))
	}
	stack, err := e2e.Launch(ctx, c, e2e.StackOptions{
		Binaries:         e2e.Binaries{Collector: collectorBin, Agent: agentBin},
		Config:           config,
		CollectorArgs:    collectorArgs,
		Dir:              out,
		APIEndpoint:      api,
		WriteOTLP:        true,
		OTLPFileMaxBytes: otlpMax,
	})
	if err != nil {
		return errors.Join(err, teardown())
	}
	for _, h := range c.Hosts {
		if endpoint, ok := stack.AgentEndpoints[h.Name]; ok {
			emit(map[string]any{"event": "agent", "host": h.Name, "endpoint": endpoint, "pid": stack.Agents[h.Name].PID()})
		}
	}
	emit(map[string]any{"event": "collector", "pid": stack.Collector.PID(), "config": config, "log": stack.Collector.Log,
		"health": "http://" + stack.Health + "/", "telemetry": "http://" + stack.Telemetry + "/metrics"})
	emit(map[string]any{"event": "api", "endpoint": stack.API, "service": "yagpcc.GetGPInfo",
		"try": "gpotel-top --addr " + stack.API})
	if history {
		emit(map[string]any{"event": "history", "database": "gpotel_history",
			"tables": []string{"gpotel_history.queries", "gpotel_history.sessions", "gpotel_history.rule_actions"},
			"try":    fmt.Sprintf("gpotel-testbed psql --dir %s -- -c '\\connect gpotel_history' -c 'TABLE gpotel_history.queries LIMIT 5'", c.Dir),
			// psql substitutes no variable in -c: the documented statements go in a file.
			"statements": fmt.Sprintf("docs/operations.md (What a DBA asks of it), each saved in a file: gpotel-testbed psql --dir %s -- -v day=%s -c "+
				"'\\connect gpotel_history' -f FILE",
				c.Dir, time.Now().UTC().Format(time.DateOnly))})
	}
	emit(map[string]any{"event": "otlp", "file": stack.OTLPFile, "endpoint": stack.Sink.Addr(), "format": "OTLP/JSON, one ExportMetricsServiceRequest per line",
		"max_bytes": otlpMax, "rotated_to": stack.OTLPFile + ".1"})

	// --duration counts from here: start-up time is not part of it.
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	var wg sync.WaitGroup
	specs := e2e.DemoWorkloads()
	for _, spec := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e2e.KeepRunning(ctx, c, spec, func(err error) {
				emit(map[string]any{"event": "workload_error", "workload": spec.Name, "error": err.Error()})
			}, func(err error) {
				emit(map[string]any{"event": "workload_ended_by_server", "workload": spec.Name, "restarted": true,
					"why": "a workload rule in enforce or gpotel-top's k or K", "error": err.Error()})
			})
		}()
	}
	emit(map[string]any{"event": "running", "duration": duration.String(), "workloads": len(specs)})
	<-ctx.Done()
	wg.Wait()
	stackErr := stack.Close()
	downErr := teardown()
	emit(map[string]any{"event": "stopped", "out": out})
	return errors.Join(stackErr, downErr)
}

// repoFile finds path as given, else relative to the repository root, so
// the demo runs from any directory of a checkout.
func repoFile(path string) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return filepath.Abs(path)
	}
	if !filepath.IsAbs(path) {
		if root, err := e2e.RepoRoot(); err == nil {
			p := filepath.Join(root, path)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s not found", path)
}

// emit prints one JSON line on stdout.
func emit(v map[string]any) {
	v["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}
