// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestReadHostFromFixtureRoot(t *testing.T) {
	auxv := filepath.Join(t.TempDir(), "auxv")
	// Not the fallbacks (CLK_TCK 100, the runtime's page size): a reader
	// that ignored the auxiliary vector would not pass.
	require.NoError(t, os.WriteFile(auxv, auxvBytes(kernelAtPageSz, 65536, kernelAtClkTck, 250, kernelAtNull, 0), 0o600))
	host, err := ReadHost(HostConfig{Root: fixtureRoot, AuxvPath: auxv, Hostname: "sdw1"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "sdw1", host.Hostname)
	assert.Equal(t, int64(250), host.ClkTck)
	assert.Equal(t, int64(65536), host.PageSize)
	assert.Equal(t, int64(1795246391), host.BootTimeUnix)
	assert.Equal(t, "6.1.0-fixture", host.KernelRelease)
}

func TestReadHostFallsBackLoudlyWithoutAuxv(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	host, err := ReadHost(HostConfig{Root: fixtureRoot, AuxvPath: filepath.Join(t.TempDir(), "missing")}, zap.New(core))
	require.NoError(t, err)
	assert.Equal(t, int64(fallbackClkTck), host.ClkTck)
	assert.Equal(t, int64(os.Getpagesize()), host.PageSize)
	assert.Equal(t, 1, logs.FilterMessageSnippet("assuming CLK_TCK 100").Len())
	want, _ := os.Hostname()
	assert.Equal(t, want, host.Hostname)
}

func TestReadHostFailsWithoutBootTime(t *testing.T) {
	_, err := ReadHost(HostConfig{Root: t.TempDir()}, nil)
	assert.ErrorContains(t, err, "boot time")
}

func TestReadHostOfThisMachine(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc")
	}
	host, err := ReadHost(HostConfig{Root: "/proc"}, nil)
	require.NoError(t, err)
	assert.Positive(t, host.BootTimeUnix)
	assert.NotEmpty(t, host.KernelRelease)
}

func FuzzParseBootTime(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join(fixtureRoot, "stat")); err == nil {
		f.Add(b)
	}
	f.Add([]byte("btime 1795246391\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := ParseBootTime(b); err == nil && v <= 0 {
			t.Fatalf("accepted %d", v)
		}
	})
}
