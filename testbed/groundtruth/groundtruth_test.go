// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package groundtruth

import (
	"os"
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/await"
)

func withRoot(t *testing.T, root string) {
	old := Root
	Root = root
	t.Cleanup(func() { Root = old })
}

func TestOnlineCPUsCountsTheCPULinesOfStat(t *testing.T) {
	withRoot(t, "testdata/proc")
	if n, err := OnlineCPUs(); err != nil || n != 3 {
		t.Fatalf("online CPUs of the fixture: %d, %v; want 3 (cpu0, cpu1, cpu3)", n, err)
	}
	withRoot(t, t.TempDir())
	if n, err := OnlineCPUs(); err == nil {
		t.Fatalf("no stat file, yet %d CPUs", n)
	}
}

func TestReadConvertsKernelUnits(t *testing.T) {
	withRoot(t, "testdata/proc")
	p, err := Read(4242)
	if err != nil {
		t.Fatal(err)
	}
	tick := float64(ClockTicks())
	want := Process{PID: 4242, StartTicks: 123456, UserSeconds: 250 / tick, SystemSeconds: 75 / tick,
		MinorFaults: 1500, MajorFaults: 7, ReadChars: 10000, WriteChars: 20000, ReadSyscalls: 30, WriteSyscalls: 40,
		ReadBytes: 4096, WriteBytes: 8192, RSSBytes: 16000 * 1024, RSSAnonBytes: 2000 * 1024,
		RSSFileBytes: 4000 * 1024, RSSShmemBytes: 10000 * 1024, VoluntaryCtxt: 55, ForcedCtxt: 6,
		BlkioDelaySeconds: 31 / tick, RunDelaySeconds: 2.5}
	if p != want {
		t.Errorf("got  %+v\nwant %+v", p, want)
	}
}

func TestParseStatRejectsTruncatedLine(t *testing.T) {
	for _, line := range []string{"", "4242 (x", "4242 (x) S 1 2 3"} {
		if _, err := parseStat([]byte(line)); err == nil {
			t.Errorf("parseStat(%q): no error", line)
		}
	}
}

func TestSumListsExitedPIDs(t *testing.T) {
	withRoot(t, "testdata/proc")
	total, err := Sum([]int{4242, 4242, 999999})
	if err != nil {
		t.Fatal(err)
	}
	if total.Processes != 2 || len(total.Exited) != 1 || total.Exited[0] != 999999 {
		t.Errorf("processes %d exited %v", total.Processes, total.Exited)
	}
	if total.WriteBytes != 2*8192 || total.RSSBytes != 2*16000*1024 {
		t.Errorf("write %d rss %d", total.WriteBytes, total.RSSBytes)
	}
}

func TestOwnCPUTimeGrows(t *testing.T) {
	before, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Burn until the kernel has charged at least a few ticks.
	x := 0.0
	for deadline := await.Deadline(t); time.Now().Before(deadline); {
		for i := 0; i < 1_000_000; i++ {
			x += float64(i) * 1.0000001
		}
		if p, _ := Read(os.Getpid()); p.UserSeconds-before.UserSeconds >= 0.05 {
			return
		}
	}
	t.Errorf("user time did not grow by 0.05s before the test's deadline (%v)", x)
}
