// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReaderTakesTheCommandCountFromTheProcessTitle(t *testing.T) {
	tests := []struct {
		name string
		pid  int64
		want *int64
	}{
		{name: "Greenplum segment backend running a slice", pid: 1010, want: ptr(int64(5))},
		{name: "Greenplum coordinator backend", pid: 1011, want: ptr(int64(5))},
		{name: "Greenplum backend before its first command", pid: 1001},
		{name: "cmd before con is not a command count", pid: 1012},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, outcome, err := NewReader(fixtureRoot).Read(tt.pid, postgresUID)
			require.NoError(t, err)
			require.Equal(t, Answered, outcome)
			assert.Equal(t, tt.want, info.CommandCount)
		})
	}
}

func TestParseCommandCount(t *testing.T) {
	tests := []struct {
		title string
		want  int64
		ok    bool
	}{
		{"postgres:  6000, gpadmin tpch 10.0.0.1(50000) con12 seg0 cmd5 slice1 MPPEXEC SELECT", 5, true},
		{"postgres:  5432, gpadmin tpch con12 cmd5 idle 10.0.0.1(50000)", 5, true},
		{"postgres:  5432, gpadmin tpch con12 seg-1 cmd9 slice2 MPPEXEC SELECT", 9, true},
		{"postgres:  5432, con1 cmd2 tpch con12 cmd7 idle in transaction 10.0.0.1(50000)", 7, true},
		{"postgres:  6000, gpadmin tpch 10.0.0.1(50000) con12 seg0 idle", 0, false},
		{"postgres: gpadmin tpch [local] SELECT", 0, false},
		{"postgres:  5432, gpadmin tpch con12 cmd99999999999 idle", 0, false},
		{"postgres:  5432, gpadmin tpch con12 cmd-3 idle", 0, false},
		{"postgres:  5432, gpadmin tpch conx cmd3 idle", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			got, ok := ParseCommandCount([]byte(tt.title))
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func FuzzParseCommandCount(f *testing.F) {
	fixtureSeeds(f, "cmdline")
	f.Add([]byte("postgres:  6000, gpadmin tpch 10.0.0.1(50000) con12 seg0 cmd5 slice1 MPPEXEC SELECT"))
	f.Fuzz(func(t *testing.T, b []byte) {
		title := ParseCmdline(bytes.Clone(b))
		ccnt, ok := ParseCommandCount(title)
		if !ok {
			if ccnt != 0 {
				t.Fatalf("%d without ok from %q", ccnt, title)
			}
			return
		}
		// A count read is one the title spells, right after con<N> or seg<N>.
		if ccnt < 0 || !bytes.Contains(title, []byte(fmt.Sprintf("cmd%d", ccnt))) {
			t.Fatalf("%d is not in %q", ccnt, title)
		}
	})
}

func ptr[T any](v T) *T { return &v }
