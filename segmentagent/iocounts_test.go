// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent/procfixture"
)

// ioCounts are the seven /proc/<pid>/io figures, as the contract names them.
var ioCounts = map[pipeline.Figure]string{
	pipeline.CharsRead: "rchar", pipeline.CharsWrite: "wchar", pipeline.SyscallsRead: "syscr", pipeline.SyscallsWrite: "syscw",
	pipeline.DiskRead: "read_bytes", pipeline.DiskWrite: "write_bytes", pipeline.CancelledWrite: "cancelled_write_bytes",
}

// procIO reads a /proc/<pid>/io file plainly, as the truth to compare with.
func procIO(t *testing.T, path string) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(path) // #nosec G304 -- the test's own tree or /proc
	require.NoError(t, err)
	out := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		key, val, ok := strings.Cut(line, ":")
		require.True(t, ok, "line %q", line)
		v, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		require.NoError(t, err)
		out[key] = v
	}
	return out
}

// assertExactIOCounts checks that the contract's reading of info has every
// I/O count of the io file, to the unit.
func assertExactIOCounts(t *testing.T, info *yagpcc.GpPidProcInfo, truth map[string]int64) {
	t.Helper()
	p := snapshot.ProcessFromAnswer(info, kernelunits.Host{ClkTck: 100, PageSize: 4096})
	for f, key := range ioCounts {
		v := p.Values[f]
		if assert.True(t, v.OK, "%s absent", key) {
			assert.Equal(t, truth[key], v.Int, "%s: the answer's reading, want /proc's", key)
		}
	}
}

// A live process's I/O counts are /proc/<pid>/io's, exact, also where the
// agent reads taskstats: the kernel's record rounds them down to a
// multiple of 1024 (xacct_add_tsk), which made 300 read calls read 0.
func TestLiveIOCountsComeFromProcIO(t *testing.T) {
	s := taskstatsService(t, strconv.Itoa(os.Getuid()))
	line := filepath.Join(t.TempDir(), "line")
	require.NoError(t, os.WriteFile(line, []byte(strings.Repeat("x", 300)+"\n"), 0o600))
	// The shell's read builtin reads its line a byte a call; told to go on,
	// the process then sleeps, so its counts stay put while both read them.
	child := exec.Command("sh", "-c", `read -r line < "$0"; read go; exec sleep 3600`, line)
	goOn, err := child.StdinPipe()
	require.NoError(t, err)
	pid := startChild(t, child)
	_, err = goOn.Write([]byte("go\n"))
	require.NoError(t, err)
	await.NoError(t, "the child to sleep", func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || string(b) != "sleep\x003600\x00" {
			return fmt.Errorf("cmdline %q (%v)", b, err)
		}
		return nil
	})
	truth := procIO(t, fmt.Sprintf("/proc/%d/io", pid))
	require.NotZero(t, truth["syscr"]%1024, "the premise: read calls the kernel's record would round")
	require.NotZero(t, truth["rchar"]%1024, "the premise: read chars the kernel's record would round")
	info, _ := readOne(t, s, pid)
	require.NotNil(t, info)
	require.NotNil(t, info.GetTaskstats(), "the agent reads taskstats for the process")
	assertExactIOCounts(t, info, truth)
}

// Without taskstats (a fixture tree, as an agent without CAP_NET_ADMIN
// reads the host) the counts are /proc/<pid>/io's too.
func TestLiveIOCountsComeFromProcIOWithoutTaskstats(t *testing.T) {
	root := procfixture.TempRoot(t)
	require.NoError(t, procfixture.Write(root, []int{4301}, 101))
	s := fixtureService(t, func(c *ServiceConfig) {
		c.ProcRoot, c.PostmasterPidFiles = root, []string{procfixture.PostmasterPidFile(root)}
	})
	info, _ := readOne(t, s, 4301)
	require.NotNil(t, info)
	require.Nil(t, info.GetTaskstats())
	assertExactIOCounts(t, info, procIO(t, filepath.Join(root, "4301", "io")))
}
