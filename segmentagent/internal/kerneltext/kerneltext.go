// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package kerneltext holds what the agent's parsers of kernel text files
// (procfs, cgroup) share: their two errors and the completeness check.
package kerneltext

import (
	"errors"
	"fmt"
)

var (
	// ErrTruncated reports a file cut short: the kernel ends every line it
	// writes in the files parsed here with a newline.
	ErrTruncated = errors.New("truncated")
	// ErrShape reports content that is not laid out the way the parser knows.
	ErrShape = errors.New("unexpected shape")
)

// ShapeError is an ErrShape that says what was unexpected.
func ShapeError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrShape, fmt.Sprintf(format, args...))
}

// EndsWithNewline tells a file the kernel wrote whole.
func EndsWithNewline(b []byte) bool {
	return len(b) > 0 && b[len(b)-1] == '\n'
}
