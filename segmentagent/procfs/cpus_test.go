// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixtureSysRoot is a sysfs tree whose host has CPUs 0-3 and 6 online.
const fixtureSysRoot = "testdata/sys"

func TestParseCPUList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint32
	}{
		{"0\n", 1},
		{"0-1\n", 2},
		{"0-3,6\n", 5},
		{"0,2,4-7,9\n", 7},
		{"0-8191\n", 8192},
	} {
		got, err := ParseCPUList([]byte(c.in))
		if assert.NoError(t, err, c.in) {
			assert.Equal(t, c.want, got, c.in)
		}
	}
}

// What the kernel never writes is refused, never counted: a list with no
// CPU, a range backwards or overlapping the one before, an id past any
// kernel's NR_CPUS, a cut file.
func TestParseCPUListRefusesWhatTheKernelNeverWrites(t *testing.T) {
	for _, in := range []string{"", "\n", "0-3", "3-1\n", "0-3,2\n", "0-3,3\n", "1,0\n", "a\n", "0-\n", "-1\n", "0,,1\n",
		"0-99999999999\n", "0-70000\n", " 0\n", "0 \n", "0-1\n\n"} {
		if n, err := ParseCPUList([]byte(in)); err == nil {
			t.Errorf("%q: accepted as %d CPUs", in, n)
		}
	}
}

func TestReadOnlineCPUsFromFixtureSysRoot(t *testing.T) {
	n, err := ReadOnlineCPUs(fixtureSysRoot)
	require.NoError(t, err)
	assert.Equal(t, uint32(5), n)

	_, err = ReadOnlineCPUs(t.TempDir())
	assert.ErrorContains(t, err, "devices/system/cpu/online")

	// A file larger than any kernel writes is refused unread.
	root := t.TempDir()
	path := filepath.Join(root, "devices", "system", "cpu", "online")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("0", maxCPUListBytes+1)), 0o600))
	_, err = ReadOnlineCPUs(root)
	assert.ErrorContains(t, err, "bytes")
}

func TestReadOnlineCPUsOfThisMachine(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/cpu/online"); err != nil {
		t.Skip("no /sys")
	}
	n, err := ReadOnlineCPUs("/sys")
	require.NoError(t, err)
	assert.Positive(t, n)
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0\n", "0-3,6\n", "0,2,4-7,9\n", "0-8191\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseCPUList(b)
		if err == nil && (n == 0 || n > maxCPUID+1) {
			t.Fatalf("%q: accepted as %d CPUs", b, n)
		}
	})
}
