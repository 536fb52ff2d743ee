// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseCmdline(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{name: "postgres title padded with NULs", in: fixture(t, "1001", "cmdline"), want: "postgres: gpadmin tpch 10.0.0.1(50000) con12 seg0 idle"},
		{name: "argv separators become blanks", in: fixture(t, "1006", "cmdline"), want: "bash -c echo secret-token"},
		{name: "kernel thread has none", in: fixture(t, "1009", "cmdline"), want: ""},
		{name: "title padded with blanks", in: []byte("postgres: checkpointer   \x00"), want: "postgres: checkpointer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, string(ParseCmdline(bytes.Clone(tt.in))))
		})
	}
}

func FuzzParseCmdline(f *testing.F) {
	fixtureSeeds(f, "cmdline")
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		got := ParseCmdline(b)
		if bytes.IndexByte(got, 0) >= 0 {
			t.Fatalf("NUL left in %q", got)
		}
		if len(got) > len(in) || (len(got) > 0 && (got[len(got)-1] == ' ')) {
			t.Fatalf("%q from %q", got, in)
		}
	})
}
