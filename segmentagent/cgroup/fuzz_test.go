// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seed adds every fixture of testdata/<dir> to f's corpus.
func seed(f *testing.F, dir string) {
	entries, err := os.ReadDir(filepath.Join("testdata", dir))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		f.Add(fixture(f, dir, e.Name()))
	}
}

func FuzzParseMountinfo(f *testing.F) {
	seed(f, "mountinfo")
	f.Fuzz(func(t *testing.T, b []byte) {
		mounts, err := ParseMountinfo(b)
		if err != nil {
			return
		}
		l := NewLayout(mounts)
		for _, m := range mounts {
			if m.Version != 1 && m.Version != 2 {
				t.Fatalf("version %d", m.Version)
			}
		}
		_, _ = l.Dir(Group{Version: 2, Path: "/gpdb/6437"})
	})
}

func FuzzParseProcCgroup(f *testing.F) {
	seed(f, "cgroup")
	hybrid := layoutOf(f, "hybrid")
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := ParseProcCgroup(b)
		if err != nil {
			return
		}
		for _, m := range ms {
			if !strings.HasPrefix(m.Path, "/") {
				t.Fatalf("path %q", m.Path)
			}
		}
		if g, ok := hybrid.GroupOf(ms, DefaultResourceGroupParents); ok {
			if dir, err := hybrid.Dir(g); err == nil && !strings.HasPrefix(dir, "/sys/fs/cgroup/") {
				t.Fatalf("group %+v resolves outside the mounts: %s", g, dir)
			}
		}
	})
}

func FuzzParsePressure(f *testing.F) {
	seed(f, "pressure")
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePressure(b)
		if err != nil {
			return
		}
		for _, s := range []Stall{p.Some, p.Full} {
			for _, avg := range []float64{s.Avg10, s.Avg60, s.Avg300} {
				if !(avg >= 0 && avg <= 100) {
					t.Fatalf("average %v outside 0..100", avg)
				}
			}
		}
	})
}

func FuzzDecodeCgroupStats(f *testing.F) {
	f.Add(cgroupstatsReply(f, []uint64{7, 2, 1, 3, 4}, 0))
	f.Add(cgroupstatsReply(f, []uint64{7, 2, 1, 3, 4}, 16))
	f.Add(cgroupstatsReply(f, []uint64{7, 2}, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeCgroupStats(b)
		if err == nil && !s.HasIOWait {
			t.Fatal("decoded stats without io_wait")
		}
	})
}
