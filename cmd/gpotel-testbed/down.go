// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

func init() {
	register(subcommand{name: "down", summary: "stop every instance and remove the directory", run: runDown})
}

func runDown(ctx context.Context, args []string) error {
	var dir string
	flags := newFlags("down", &dir, true)
	if err := parse(flags, args); err != nil {
		return err
	}
	c, err := loadTestbed(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(os.Stderr, "no testbed in %s; nothing to do\n", dir)
			return nil
		}
		return err
	}
	if err := c.Down(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "testbed %s down, %s removed\n", c.ID, c.Dir)
	return nil
}
