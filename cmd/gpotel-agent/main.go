// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Command gpotel-agent runs on every segment host and answers the
// coordinator's GetPidProcStat calls from /proc. See segmentagent/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/gpotel/gpotel/segmentagent"
)

// shutdownGrace is how long calls in flight may take after SIGTERM.
const shutdownGrace = 10 * time.Second

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "gpotel-agent:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg, err := segmentagent.ConfigFromArgs(args, os.Stderr)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	level, _ := zapcore.ParseLevel(cfg.LogLevel)
	logCfg := zap.NewProductionConfig()
	logCfg.Level = zap.NewAtomicLevelAt(level)
	logger, err := logCfg.Build()
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()

	agent, err := segmentagent.New(cfg, logger)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := agent.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	return agent.Shutdown(shutdownCtx)
}
