// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"errors"
	"fmt"
)

var (
	// ErrTruncated reports a file cut short: the kernel ends every line it
	// writes in these files with a newline.
	ErrTruncated = errors.New("truncated")
	// ErrShape reports content that is not laid out the way this parser knows.
	ErrShape = errors.New("unexpected shape")
)

func shapeError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrShape, fmt.Sprintf(format, args...))
}

func endsWithNewline(b []byte) bool {
	return len(b) > 0 && b[len(b)-1] == '\n'
}
