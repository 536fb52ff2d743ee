// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

func TestParseSchedstat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Schedstat
		wantErr error
	}{
		{name: "three fields", in: string(fixture(t, "1001", "schedstat")), want: Schedstat{9123456789, 12345678, 4321}},
		{name: "truncated file is an error", in: string(fixture(t, "1004", "schedstat")), wantErr: ErrTruncated},
		{name: "two fields is a shape error", in: string(fixture(t, "1005", "schedstat")), wantErr: ErrShape},
		{name: "four fields is a shape error", in: "1 2 3 4\n", wantErr: ErrShape},
		{name: "letters are a shape error", in: "1 x 3\n", wantErr: ErrShape},
		{name: "empty is truncated", in: "", wantErr: ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSchedstat([]byte(tt.in))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseSchedstatDoesNotAllocate(t *testing.T) {
	b := fixture(t, "1001", "schedstat")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := ParseSchedstat(b); err != nil {
			t.Fatal(err)
		}
	}))
}

func FuzzParseSchedstat(f *testing.F) {
	fixtureSeeds(f, "schedstat")
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := ParseSchedstat(b); err == nil && !kerneltext.EndsWithNewline(b) {
			t.Fatal("accepted a file without its final newline")
		}
	})
}
