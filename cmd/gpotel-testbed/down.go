package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpotel/gpotel/testbed/cluster"
)

func init() {
	register(subcommand{name: "down", summary: "stop every instance and remove the directory", run: runDown})
}

func runDown(ctx context.Context, args []string) error {
	var dir string
	fs := newFlags("down", &dir, true)
	if err := parse(fs, args); err != nil {
		return err
	}
	if dir == "" {
		return errors.New("--dir is required")
	}
	c, err := cluster.Load(dir)
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "cluster.json")); os.IsNotExist(statErr) {
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
