// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
)

func init() {
	register(subcommand{name: "up", summary: "initialise and start a cluster, print its JSON description", run: runUp})
}

func runUp(ctx context.Context, args []string) error {
	var (
		dir         string
		opts        cluster.Options
		dialectName string
	)
	fs := newFlags("up", &dir, false)
	fs.IntVar(&opts.Hosts, "hosts", 2, "emulated segment hosts (sdw1..sdwN)")
	fs.IntVar(&opts.SegmentsPerHost, "segments-per-host", 2, "primary segments per host")
	fs.StringVar(&dialectName, "dialect", string(dialect.GP6), dialect.Names(false))
	if err := parse(fs, args); err != nil {
		return err
	}
	opts.Dir = dir
	opts.Dialect = dialect.Dialect(dialectName)
	if opts.Dialect.Known() && !opts.Dialect.Greenplum() && !flagSet(fs.Visit, "hosts") {
		opts.Hosts = 0
	}
	begin := time.Now()
	c, err := cluster.Up(ctx, opts)
	if err != nil {
		return err
	}
	if _, err := os.Stdout.Write(c.JSON()); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "testbed %s up in %v: 1 coordinator + %d segments in %s (stop with: gpotel-testbed down --dir %s)\n",
		c.ID, time.Since(begin).Round(time.Millisecond), len(c.Segments), c.Dir, c.Dir)
	return nil
}

func flagSet(visit func(func(*flag.Flag)), name string) bool {
	found := false
	visit(func(f *flag.Flag) {
		if f.Name == name {
			found = true
		}
	})
	return found
}
