// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

// fixtureRoot is the procfs fixture tree the reader's own tests use; its
// pids are described in procfs/testdata (1001 modern kernel, 1002 old kernel,
// 1003 comm with parentheses, 1004 truncated, 1005 io/schedstat of unknown
// shape, 1006 another user, 1007 status of unknown shape, 1008 io
// unreadable, 1009 kernel thread of root); their postmaster is 900.
const fixtureRoot = "procfs/testdata/proc"

// fixturePostmaster names the fixture's postmaster, 900, as a postmaster_pid_files entry.
const fixturePostmaster = "testdata/postmaster.pid"

// postgresUID owns the fixture's database processes.
const postgresUID = "101"

func copyFixture(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.CopyFS(root, os.DirFS(fixtureRoot)))
	return root
}

func fixtureService(t testing.TB, mutate ...func(*ServiceConfig)) *Service {
	t.Helper()
	cfg := ServiceConfig{ProcRoot: fixtureRoot, AllowedUsers: []string{postgresUID}, PostmasterPidFiles: []string{fixturePostmaster}, Hostname: "sdw1"}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := NewService(cfg, nil, nil)
	require.NoError(t, err)
	return s
}

func request(pids ...int64) *yagpcc.GetPidProcInfoReq {
	req := &yagpcc.GetPidProcInfoReq{}
	for i, pid := range pids {
		req.SegmentProcess = append(req.SegmentProcess, &yagpcc.SegmentProcess{GpSegmentId: int64(i % 2), SessId: 7, Pid: pid})
	}
	return req
}

func answeredPids(resp *yagpcc.GetPidProcInfoResponse) []int64 {
	var pids []int64
	for _, p := range resp.GetPidProcData() {
		pids = append(pids, p.GetPid())
	}
	return pids
}

// sumCounter adds up one counter's data points whose attribute key has the given value.
func sumCounter(t testing.TB, reader *sdkmetric.ManualReader, name, key, value string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is not an int64 sum", name)
			for _, dp := range sum.DataPoints {
				if v, ok := dp.Attributes.Value(attribute.Key(key)); ok && v.AsString() == value {
					total += dp.Value
				}
			}
		}
	}
	return total
}
