// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

const runMainEnv = "GPOTEL_AGENT_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) != "" {
		main()
		return
	}
	os.Exit(m.Run())
}

// The real binary: starts from flags, answers a call, and exits 0 on SIGTERM.
func TestAgentServesAndStopsCleanlyOnSIGTERM(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, "--listen", "127.0.0.1:0", "--proc-root", "../../segmentagent/procfs/testdata/proc",
		"--allowed-users", "101", "--postmaster-pid-files", "../../segmentagent/testdata/postmaster.pid", "--hostname", "sdw9")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	lines := bufio.NewScanner(stderr)
	var addr string
	for addr == "" && lines.Scan() {
		var entry struct {
			Msg     string `json:"msg"`
			Address string `json:"address"`
		}
		if json.Unmarshal(lines.Bytes(), &entry) == nil && entry.Msg == "gpotel agent listening" {
			addr = entry.Address
		}
	}
	require.NotEmpty(t, addr, "the agent never said where it listens")

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	ctx := await.Context(t)
	resp, err := yagpcc.NewGetQueryInfoClient(conn).GetPidProcStat(ctx, &yagpcc.GetPidProcInfoReq{
		SegmentProcess: []*yagpcc.SegmentProcess{{Pid: 1001}},
	})
	require.NoError(t, err)
	assert.Equal(t, "sdw9", resp.Host.Hostname)
	require.Len(t, resp.PidProcData, 1)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	var rest strings.Builder
	for lines.Scan() {
		rest.WriteString(lines.Text())
	}
	require.NoError(t, cmd.Wait(), "exit status after SIGTERM")
	assert.Contains(t, rest.String(), "shutting down")
}

func TestBadFlagsExitNonZero(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, "--max-pids-per-request", "-4")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "max_pids_per_request -4 is negative")
}
