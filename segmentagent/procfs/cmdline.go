// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

// ParseCmdline turns /proc/<pid>/cmdline into one line in place: NUL
// separators become blanks, and the trailing NULs and blanks are dropped
// (PostgreSQL pads its rewritten process title with them). It returns a
// subslice of b and never allocates.
func ParseCmdline(b []byte) []byte {
	end := len(b)
	for end > 0 && (b[end-1] == 0 || b[end-1] == ' ') {
		end--
	}
	b = b[:end]
	for i, c := range b {
		if c == 0 {
			b[i] = ' '
		}
	}
	return b
}
