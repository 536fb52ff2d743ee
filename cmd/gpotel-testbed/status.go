// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/testbed/cluster"
)

func init() {
	register(subcommand{name: "status", summary: "show each instance and whether it answers", run: runStatus})
}

func runStatus(ctx context.Context, args []string) error {
	var dir string
	fs := newFlags("status", &dir, true)
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := loadTestbed(dir)
	if err != nil {
		return err
	}
	fmt.Printf("testbed %s, dialect %s, %s\n", c.ID, c.Dialect, c.Dir)
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "CONTENT\tHOST\tAGENT ADDRESS\tPORT\tPOSTMASTER\tSTATE")
	down := 0
	for _, in := range c.Instances() {
		state := probe(ctx, in)
		if state != "up" {
			down++
		}
		_, _ = fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\t%s\n", in.Content, in.Host, agentAddress(c, in.Host), in.Port, in.PostmasterPID, state)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if down > 0 {
		return fmt.Errorf("%d of %d instances are not up", down, len(c.Instances()))
	}
	return nil
}

func agentAddress(c *cluster.Cluster, host string) string {
	for _, h := range c.Hosts {
		if h.Name == host {
			return h.AgentAddress
		}
	}
	return "-"
}

// probe says whether the postmaster lives and answers a query.
func probe(ctx context.Context, in cluster.Instance) string {
	if in.PostmasterPID <= 0 || syscall.Kill(in.PostmasterPID, 0) != nil {
		return "no postmaster"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, in.DSN)
	if err != nil {
		return "not answering: " + err.Error()
	}
	defer func() { _ = conn.Close(ctx) }()
	if err := conn.Ping(ctx); err != nil {
		return "not answering: " + err.Error()
	}
	return "up"
}
