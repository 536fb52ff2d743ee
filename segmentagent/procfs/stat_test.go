// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

func TestParseStat(t *testing.T) {
	modern := Stat{
		PID: 1001, Comm: []byte("postgres"), State: 'S', PPID: 900, PGRP: 900, Session: 900, TTYNr: 0, TPGID: -1,
		Flags: 4194560, MinFlt: 8123, MajFlt: 12, UTime: 1234, STime: 567, Priority: 20, NumThreads: 1,
		StartTime: 54400, VSize: 226508800, RSS: 6910, RSSLim: -1, Processor: 1, DelayAcctBlkioTicks: 42,
	}
	withComm := func(s Stat, pid int64, comm string) Stat {
		s.PID, s.Comm = pid, []byte(comm)
		return s
	}
	// 1001 has a distinct value in every field gpotel keeps (its children's
	// times and faults too), so a field read from its neighbour shows.
	full := modern
	full.CMinFlt, full.CMajFlt, full.CUTime, full.CSTime, full.Nice, full.GuestTime, full.CGuestTime = 31, 2, 3310, 1420, 5, 7, 9
	old := withComm(modern, 1002, "postgres")
	old.Flags = 4202752

	tests := []struct {
		name    string
		pid     string
		want    Stat
		wantErr error
	}{
		{name: "modern kernel prints 52 fields", pid: "1001", want: full},
		{name: "2.6.32 kernel prints 44 fields", pid: "1002", want: old},
		{name: "comm with spaces and parentheses parses whole", pid: "1003", want: withComm(modern, 1003, "postgres: (x) y")},
		{name: "truncated file is an error", pid: "1004", wantErr: ErrTruncated},
		{name: "non-numeric field is a shape error", pid: "1007", wantErr: ErrShape},
		{name: "kernel thread comm with a slash", pid: "1009", want: withComm(modern, 1009, "kworker/0:1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat(fixture(t, tt.pid, "stat"))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseStatShapes(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"no comm", "12 S 1 1\n"},
		{"state longer than a letter", "12 (x) SS 1\n"},
		{"too few fields", "12 (x) S 1 2 3\n"},
		{"field overflows u64", "12 (x) S 1 1 1 0 -1 0 0 0 0 0 99999999999999999999 0 0 0 20 0 1 0 5 6 7 8\n"},
		{"double blank", "12 (x) S  1 1 1 0 -1 0 0 0 0 0 1 0 0 0 20 0 1 0 5 6 7 8\n"},
		{"pid not a number", "1x (x) S 1 1 1 0 -1 0 0 0 0 0 1 0 0 0 20 0 1 0 5 6 7 8\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseStat([]byte(tt.in))
			assert.Error(t, err)
		})
	}
}

func TestParseStatDoesNotAllocate(t *testing.T) {
	b := fixture(t, "1003", "stat")
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := ParseStat(b); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

func FuzzParseStat(f *testing.F) {
	fixtureSeeds(f, "stat")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStat(b)
		if err != nil {
			return
		}
		// A parsed comm is always the text between the parentheses of the input.
		if !bytes.Contains(b, append(append([]byte("("), s.Comm...), ')')) {
			t.Fatalf("comm %q is not a parenthesised part of the input", s.Comm)
		}
		if !kerneltext.EndsWithNewline(b) {
			t.Fatal("accepted a file without its final newline")
		}
	})
}
