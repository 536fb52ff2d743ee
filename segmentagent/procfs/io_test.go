// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

func TestParseIO(t *testing.T) {
	full := IO{RChar: 7340032, WChar: 2097152, SyscR: 812, SyscW: 256, ReadBytes: 4096000, WriteBytes: 1048576, CancelledWriteBytes: 8192}
	tests := []struct {
		name    string
		pid     string
		want    IO
		wantErr error
		wantMsg string
	}{
		{name: "all seven lines", pid: "1001", want: full},
		{name: "truncated file is an error", pid: "1004", wantErr: ErrTruncated},
		{name: "missing lines are a shape error naming the first", pid: "1005", wantErr: ErrShape, wantMsg: "no write_bytes line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseIO(fixture(t, tt.pid, "io"))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), tt.wantMsg)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseIOIgnoresUnknownLines(t *testing.T) {
	in := "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 5\nwrite_bytes: 6\ncancelled_write_bytes: 7\nfuture_counter: 8\n"
	got, err := ParseIO([]byte(in))
	require.NoError(t, err)
	assert.Equal(t, IO{1, 2, 3, 4, 5, 6, 7}, got)
}

func TestParseIORejectsLineWithoutColon(t *testing.T) {
	_, err := ParseIO([]byte("rchar 1\n"))
	require.ErrorIs(t, err, ErrShape)
}

func TestParseIODoesNotAllocate(t *testing.T) {
	b := fixture(t, "1001", "io")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := ParseIO(b); err != nil {
			t.Fatal(err)
		}
	}))
}

func FuzzParseIO(f *testing.F) {
	fixtureSeeds(f, "io")
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := ParseIO(b); err == nil && !kerneltext.EndsWithNewline(b) {
			t.Fatal("accepted a file without its final newline")
		}
	})
}
