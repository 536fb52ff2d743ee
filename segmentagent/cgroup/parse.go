// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import "github.com/gpotel/gpotel/segmentagent/internal/kerneltext"

// The parse errors, the same values as procfs's.
var (
	ErrTruncated = kerneltext.ErrTruncated
	ErrShape     = kerneltext.ErrShape
)
