// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Command gpotel-top shows, like top, which database sessions cost the OS the
// most over the last window, read from gpotel's GetGPSessions API, under a
// header of the cluster's and each host's load from GetClusterTop.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gpotel-top:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("gpotel-top", flag.ContinueOnError)
	var o clientOptions
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:1432", "GetGPInfo API address (host:port)")
	fs.BoolVar(&o.TLS, "tls", false, "use TLS (implied by --tls-ca or --tls-cert)")
	fs.StringVar(&o.CAFile, "tls-ca", "", "CA file that signed the server certificate")
	fs.StringVar(&o.CertFile, "tls-cert", "", "client certificate for mutual TLS")
	fs.StringVar(&o.KeyFile, "tls-key", "", "client key for mutual TLS")
	fs.StringVar(&o.ServerName, "tls-server-name", "", "server name to verify instead of the address host")
	fs.BoolVar(&o.SkipVerify, "tls-insecure-skip-verify", false, "do not verify the server certificate")
	fs.StringVar(&o.Token, "token", "", "refused: a token on the command line shows in ps; use --token-file or $"+tokenEnv)
	fs.StringVar(&o.TokenFile, "token-file", "", "file holding the bearer token (default: $"+tokenEnv+"); sent only over TLS or to loopback")
	fs.StringVar(&o.ActionTokenFile, "action-token-file", "", "file holding the collector's action token for k and K (default: $"+actionTokenEnv+"); sent only over TLS or to loopback")
	fs.BoolVar(&o.ShowSystem, "system", false, "include system processes (no client session)")
	fs.DurationVar(&o.CallTimeout, "timeout", 5*time.Second, "deadline of one GetGPSessions call")
	interval := fs.Duration("interval", 2*time.Second, "refresh interval")
	once := fs.Bool("once", false, "print one plain-text table and exit")
	sortName := fs.String("sort", "cpu", "initial sort: cpu, memory, read, write, delay, skew, avg, spill")
	width := fs.Int("width", 0, "cut --once lines to this many columns (0: $COLUMNS, else no cut)")
	memSess := fs.Int64("memory", 0, "with --once: print this session's memory contexts by name (GetSessionMemoryContexts)")
	memBackend := fs.Int("backend", 0, "with --memory: print backend N's context tree instead (N as listed)")
	viewName := fs.String("view", "sessions", "with --once: sessions, queries or hosts (GetClusterTop)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	k, err := parseSortKey(*sortName)
	if err != nil {
		return err
	}
	if *interval <= 0 {
		return fmt.Errorf("--interval must be positive")
	}
	view := slices.Index(viewNames[:], *viewName)
	if view < 0 {
		return fmt.Errorf("unknown --view %q: want sessions, queries or hosts", *viewName)
	}
	if view != int(viewSessions) && !*once {
		return fmt.Errorf("--view prints once: add --once (in the screen, tab changes the view)")
	}
	if (*memSess != 0 || *memBackend != 0) && !*once {
		return fmt.Errorf("--memory and --backend print once: add --once (in the screen, select a session and press x)")
	}
	c, err := dial(ctx, o)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if *once {
		w := *width
		if w == 0 {
			w, _ = strconv.Atoi(os.Getenv("COLUMNS"))
		}
		if *memSess != 0 {
			return printMemoryOnce(ctx, c, *memSess, *memBackend, w, out)
		}
		if view != int(viewSessions) {
			return printTopOnce(ctx, c, k, viewMode(view), w, out)
		}
		return printOnce(ctx, c, k, w, out)
	}
	return runTUI(ctx, c, *interval, k)
}

// printOnce writes the status line and one table, for scripts and tests.
func printOnce(ctx context.Context, c *sessionClient, k SortKey, width int, out io.Writer) error {
	rows, err := c.sessions(ctx, k)
	if err != nil {
		return err
	}
	header := ""
	// The cluster header, every host, when the server has GetClusterTop.
	if top, err := c.clusterTop(ctx, k); err == nil {
		header = clusterHeader(top, len(top.GetHosts())+1, width)
		addVmem(rows, top)
	}
	if _, err = fmt.Fprintf(out, "%s\n%s%s", summary(c.opts.Addr, rows, k), header, formatTable(rows, width)); err != nil {
		return err
	}
	// The pane follows the table after a blank line, when the server has pressure.
	if hosts, err := c.hostPressure(ctx); err == nil && len(hosts) > 0 {
		_, err = fmt.Fprintf(out, "\n%s", pressurePane(hosts, width))
		return err
	}
	return nil
}

// printTopOnce writes the cluster header and the queries or hosts table of
// one GetClusterTop answer, for scripts.
func printTopOnce(ctx context.Context, c *sessionClient, k SortKey, view viewMode, width int, out io.Writer) error {
	top, err := c.clusterTop(ctx, k)
	if err != nil {
		return err
	}
	table := hostTable(top, 0, width)
	if view == viewQueries {
		table = queryTable(top.GetQueries(), 0, width)
	}
	_, err = fmt.Fprintf(out, "%s%s", clusterHeader(top, len(top.GetHosts())+1, width), table)
	return err
}
