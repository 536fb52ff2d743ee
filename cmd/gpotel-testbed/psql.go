// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gpotel/gpotel/testbed/cluster"
)

func init() {
	register(subcommand{name: "psql", summary: "run psql against an instance (--content N, default the coordinator; psql args after --)", run: runPsql})
}

func runPsql(_ context.Context, args []string) error {
	var (
		dir     string
		content int
	)
	fs := newFlags("psql", &dir, true)
	fs.IntVar(&content, "content", cluster.CoordinatorContent, "content id of the instance (-1 is the coordinator)")
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := loadTestbed(dir)
	if err != nil {
		return err
	}
	in, ok := c.Instance(content)
	if !ok {
		return fmt.Errorf("testbed %s has no instance with content %d", c.ID, content)
	}
	psql := filepath.Join(c.PGBinDir, "psql")
	argv := append([]string{"psql", in.DSN}, fs.Args()...)
	return syscall.Exec(psql, argv, os.Environ())
}
