// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Command gpotel-testbed starts and stops a testbed cluster: PostgreSQL
// instances on loopback that look like a Greenplum cluster (testbed/README.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/gpotel/gpotel/testbed/cluster"
)

// subcommand is one verb of the launcher; each lives in its own file and
// registers itself in init.
type subcommand struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

var subcommands = map[string]subcommand{}

func register(c subcommand) { subcommands[c.name] = c }

// errUsage marks an error the flag package has already explained.
var errUsage = errors.New("usage")

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd, ok := subcommands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "gpotel-testbed: unknown subcommand %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cmd.run(ctx, os.Args[2:])
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintf(os.Stderr, "gpotel-testbed %s: %v\n", cmd.name, err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: gpotel-testbed <subcommand> [flags]")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, subcommands[n].summary)
	}
}

// newFlags makes a subcommand's flag set with the --dir flag every verb takes.
func newFlags(name string, dir *string, dirRequired bool) *flag.FlagSet {
	fs := flag.NewFlagSet("gpotel-testbed "+name, flag.ContinueOnError)
	help := "directory holding the testbed (cluster.json, data dirs)"
	if !dirRequired {
		help += "; empty means a new temporary directory"
	}
	fs.StringVar(dir, "dir", "", help)
	return fs
}

// loadTestbed loads the testbed described in --dir, which these subcommands require.
func loadTestbed(dir string) (*cluster.Cluster, error) {
	if dir == "" {
		return nil, errors.New("--dir is required")
	}
	return cluster.Load(dir)
}

// parse wraps flag parsing errors so main exits 2 without repeating them.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}
