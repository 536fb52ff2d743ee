// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The auxiliary vector's keys as linux/auxvec.h numbers them, written out
// here so that a wrong constant in auxv.go shows.
const (
	kernelAtNull   = 0
	kernelAtPageSz = 6
	kernelAtClkTck = 17
)

func auxvBytes(pairs ...uint64) []byte {
	var b []byte
	for _, v := range pairs {
		b = binary.NativeEndian.AppendUint64(b, v)
	}
	return b
}

func TestParseAuxv(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    Auxv
		wantErr bool
	}{
		{name: "both entries before AT_NULL", in: auxvBytes(33, 7, kernelAtPageSz, 4096, kernelAtClkTck, 100, kernelAtNull, 0),
			want: Auxv{ClkTck: 100, PageSize: 4096}},
		{name: "entries after AT_NULL are ignored", in: auxvBytes(kernelAtPageSz, 4096, kernelAtNull, 0, kernelAtClkTck, 100), wantErr: true},
		{name: "odd trailing bytes are ignored", in: append(auxvBytes(kernelAtPageSz, 65536, kernelAtClkTck, 250), 1, 2, 3),
			want: Auxv{ClkTck: 250, PageSize: 65536}},
		{name: "empty", in: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAuxv(tt.in)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrShape)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseAuxvOfThisProcessMatchesTheRuntime(t *testing.T) {
	raw, err := os.ReadFile(SelfAuxvPath)
	if err != nil {
		t.Skipf("no auxv here: %v", err)
	}
	got, err := ParseAuxv(raw)
	require.NoError(t, err)
	assert.Equal(t, int64(os.Getpagesize()), got.PageSize)
	assert.Positive(t, got.ClkTck)
}

func FuzzParseAuxv(f *testing.F) {
	f.Add(auxvBytes(kernelAtPageSz, 4096, kernelAtClkTck, 100, kernelAtNull, 0))
	if raw, err := os.ReadFile(SelfAuxvPath); err == nil {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if a, err := ParseAuxv(b); err == nil && (a.ClkTck <= 0 || a.PageSize <= 0) {
			t.Fatalf("accepted %+v", a)
		}
	})
}
