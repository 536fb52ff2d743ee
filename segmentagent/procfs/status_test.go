// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStatus(t *testing.T) {
	modern := Status{
		Name: []byte("postgres"), Tgid: 1001, PPid: 900, UIDReal: 101, UIDEffective: 101,
		Threads: 1, VoluntaryCtxtSwitches: 4512, NonvoluntaryCtxtSwitches: 37,
	}
	withLines(&modern, map[StatusLine]int64{VmPeak: 221340, VmSize: 221200, VmHWM: 28812, VmRSS: 27640,
		RssAnon: 6120, RssFile: 9480, RssShmem: 12040, VmData: 5620, VmSwap: 12, VmPTE: 148})
	old := modern
	old.Tgid = 1002
	old.KiB, old.Present = [numStatusLines]int64{}, 0
	withLines(&old, map[StatusLine]int64{VmPeak: 221340, VmSize: 221200, VmHWM: 28812, VmRSS: 27640, VmData: 5620, VmPTE: 148})
	spaced := modern
	spaced.Tgid, spaced.Name = 1003, []byte("postgres: (x) y")
	kthread := Status{
		Name: []byte("kworker/0:1"), Tgid: 1009, PPid: 2, Threads: 1, VoluntaryCtxtSwitches: 99,
	}
	other := modern
	// Its effective uid is the database user's, its real one not: the real one decides.
	other.Tgid, other.Name, other.UIDReal, other.UIDEffective = 1006, []byte("bash"), 65534, 101

	tests := []struct {
		name    string
		pid     string
		want    Status
		wantErr error
	}{
		{name: "modern kernel has RssAnon, RssFile, RssShmem", pid: "1001", want: modern},
		{name: "kernel before 4.5 lacks the Rss split and VmSwap", pid: "1002", want: old},
		{name: "name with spaces and parentheses", pid: "1003", want: spaced},
		{name: "kernel thread has no Vm lines", pid: "1009", want: kthread},
		{name: "uid of another user is read", pid: "1006", want: other},
		{name: "truncated file is an error", pid: "1004", wantErr: ErrTruncated},
		{name: "Uid line without columns is a shape error", pid: "1007", wantErr: ErrShape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStatus(fixture(t, tt.pid, "status"))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// withLines sets the optional lines s has.
func withLines(s *Status, kib map[StatusLine]int64) {
	for l, v := range kib {
		s.KiB[l] = v
		s.Present |= 1 << l
	}
}

func TestParseStatusShapes(t *testing.T) {
	tests := []struct {
		name, in, wantMsg string
	}{
		{"missing Uid line", "Name:\tx\nTgid:\t1\nPPid:\t0\nThreads:\t1\nvoluntary_ctxt_switches:\t0\nnonvoluntary_ctxt_switches:\t0\n", "no Uid line"},
		{"kB line without unit", "Name:\tx\nVmRSS:\t12\n", "no kB unit"},
		{"number that is not", "Name:\tx\nThreads:\tmany\n", "not a number"},
		{"negative uid", "Name:\tx\nUid:\t-1\t0\t0\t0\n", "Uid line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseStatus([]byte(tt.in))
			require.ErrorIs(t, err, ErrShape)
			assert.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}

func TestParseStatusDoesNotAllocate(t *testing.T) {
	b := fixture(t, "1001", "status")
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := ParseStatus(b); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

func FuzzParseStatus(f *testing.F) {
	fixtureSeeds(f, "status")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStatus(b)
		if err != nil {
			return
		}
		if s.UIDReal < 0 || s.UIDEffective < 0 {
			t.Fatalf("accepted negative uids %d/%d", s.UIDReal, s.UIDEffective)
		}
		if s.Present>>numStatusLines != 0 {
			t.Fatalf("unknown presence bits %b", s.Present)
		}
	})
}
