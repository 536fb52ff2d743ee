// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package hostcaps tells what this machine's kernel offers, for the tests
// that read the real one: a test asserts a figure where the kernel has
// what it needs, and where it has not, that gpotel says why.
package hostcaps

import (
	"fmt"
	"os"
)

// PSI returns nil when the kernel reports pressure stall information
// (/proc/pressure/cpu is readable: CONFIG_PSI, and not booted with psi=0),
// else why not.
func PSI() error {
	if _, err := os.ReadFile("/proc/pressure/cpu"); err != nil {
		return fmt.Errorf("this kernel has no pressure stall information (PSI): %w", err)
	}
	return nil
}
