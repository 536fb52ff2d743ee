// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadConfigReadsEveryKey(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml")
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:1433", cfg.ListenAddress)
	assert.Equal(t, "/proc", cfg.ProcRoot)
	assert.Equal(t, []string{"gpadmin", "1001"}, cfg.AllowedUsers)
	assert.Equal(t, []string{"/data/primary/gpseg0/postmaster.pid"}, cfg.PostmasterPidFiles)
	assert.Equal(t, 10000, cfg.MaxPidsPerRequest)
	assert.Equal(t, 2, cfg.ReadParallelism)
	assert.Equal(t, "sdw1", cfg.Hostname)
	assert.Equal(t, TaskstatsConfig{Enabled: true, ExitBufferSize: 65536, ExitMaxAge: 30 * time.Minute, ListenerReadBufferKiB: 4096}, cfg.Taskstats)
	assert.Equal(t, CgroupsConfig{ResourceGroupParents: []string{"gpdb", "gpdb.service"}}, cfg.Cgroups)
	require.NotNil(t, cfg.TLS)
	assert.Equal(t, "/etc/gpotel/agent.crt", cfg.TLS.CertFile)
	assert.Equal(t, "/etc/gpotel/ca.crt", cfg.TLS.ClientCAFile)
	assert.Equal(t, "1.3", cfg.TLS.MinVersion)
	assert.Equal(t, []string{"gpotel-collector", "collector.example.com"}, cfg.AllowedClients)
	assert.Equal(t, "127.0.0.1:9464", cfg.Telemetry.PrometheusAddress)
	assert.Equal(t, []string{"/data/primary/gpseg0", "/data/primary/gpseg1"}, cfg.MemoryContexts.DataDirectories)
	assert.Equal(t, "gpadmin", cfg.MemoryContexts.DatabaseUser)
	assert.Equal(t, 10*time.Second, cfg.MemoryContexts.MinInterval)
	assert.Equal(t, 4, cfg.MemoryContexts.MaxInFlight)
	assert.NoError(t, cfg.Validate())
}

func TestMemoryContextsFlagsAndLimitsAreChecked(t *testing.T) {
	cfg, err := ConfigFromArgs([]string{"--memory-contexts-data-dirs", "/d/gpseg0, /d/gpseg1", "--memory-contexts-database-user", "gpmon",
		"--memory-contexts-min-interval", "3s"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"/d/gpseg0", "/d/gpseg1"}, cfg.MemoryContexts.DataDirectories)
	assert.Equal(t, "gpmon", cfg.MemoryContexts.DatabaseUser)
	assert.Equal(t, 3*time.Second, cfg.MemoryContexts.MinInterval)
	cfg.MemoryContexts.Timeout = 2 * time.Minute
	cfg.MemoryContexts.MaxInFlight = -1
	cfg.MemoryContexts.DataDirectories = []string{""}
	err = cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{"memory_contexts.timeout", "memory_contexts.max_in_flight", "memory_contexts.data_directories[0]"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestLoadConfigKeepsDefaultsForAbsentKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte("hostname: sdw2\n"), 0o600))
	cfg, err := LoadConfig(path)
	require.NoError(t, err)
	want := NewDefaultConfig()
	want.Hostname = "sdw2"
	assert.Equal(t, want, cfg)
}

func TestLoadConfigRejectsUnknownKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte("listen: 1.2.3.4:5\n"), 0o600))
	_, err := LoadConfig(path)
	assert.ErrorContains(t, err, "listen")
}

func TestValidateReportsEveryProblem(t *testing.T) {
	cfg := NewDefaultConfig()
	cfg.ListenAddress = "no-port"
	cfg.MaxPidsPerRequest = -1
	cfg.ReadParallelism = -2
	cfg.AllowedUsers = []string{" "}
	cfg.MaxRecvMsgSizeMiB = 0
	cfg.Telemetry.PrometheusAddress = "bad"
	cfg.LogLevel = "loud"
	cfg.Taskstats.ExitBufferSize = -1
	cfg.Taskstats.ExitMaxAge = -time.Second
	err := cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{"listen_address", "max_pids_per_request -1", "read_parallelism -2", "allowed_users[0] is empty",
		"taskstats.exit_buffer_size -1", "taskstats.exit_max_age -1s",
		"max_recv_msg_size_mib 0", "telemetry.prometheus_address", "log_level"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestValidateRejectsTLSWithoutKey(t *testing.T) {
	cfg, err := ConfigFromArgs([]string{"--tls-cert-file", "/c.pem"}, io.Discard)
	require.NoError(t, err)
	assert.ErrorContains(t, cfg.Validate(), "tls")
}

func TestFlagsOverrideTheFile(t *testing.T) {
	cfg, err := ConfigFromArgs([]string{"--config", "testdata/config.yaml", "--listen", "127.0.0.1:0",
		"--allowed-users", "postgres, 0", "--tls-client-ca-file", "/other-ca.pem", "--max-pids-per-request", "50",
		"--cgroups-disabled", "--resource-group-parents", "rg"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:0", cfg.ListenAddress)
	assert.Equal(t, []string{"postgres", "0"}, cfg.AllowedUsers)
	assert.Equal(t, "/other-ca.pem", cfg.TLS.ClientCAFile)
	assert.Equal(t, "/etc/gpotel/agent.crt", cfg.TLS.CertFile, "file values not named by a flag stay")
	assert.Equal(t, 50, cfg.MaxPidsPerRequest)
	assert.Equal(t, CgroupsConfig{Disabled: true, ResourceGroupParents: []string{"rg"}}, cfg.Cgroups)
	assert.Equal(t, "sdw1", cfg.Hostname)
	assert.Equal(t, TaskstatsConfig{Enabled: true, ExitBufferSize: 65536, ExitMaxAge: 30 * time.Minute, ListenerReadBufferKiB: 4096}, cfg.Taskstats)
}

func TestFlagsWithoutAFileStartFromDefaults(t *testing.T) {
	cfg, err := ConfigFromArgs([]string{"--proc-root", "/host/proc"}, io.Discard)
	require.NoError(t, err)
	want := NewDefaultConfig()
	want.ProcRoot = "/host/proc"
	assert.Equal(t, want, cfg)
}

func TestConfigFromArgsErrors(t *testing.T) {
	_, err := ConfigFromArgs([]string{"-h"}, io.Discard)
	assert.ErrorIs(t, err, flag.ErrHelp)
	_, err = ConfigFromArgs([]string{"stray"}, io.Discard)
	assert.ErrorContains(t, err, "unexpected arguments")
	_, err = ConfigFromArgs([]string{"--config", "testdata/missing.yaml"}, io.Discard)
	assert.Error(t, err)
}

func TestDefaultListenAddressIsLoopback(t *testing.T) {
	assert.Equal(t, "127.0.0.1:1433", NewDefaultConfig().ListenAddress)
}

func TestPlaintextBeyondLoopbackNeedsInsecure(t *testing.T) {
	cfg, err := ConfigFromArgs([]string{"--listen", "0.0.0.0:1433"}, io.Discard)
	require.NoError(t, err)
	assert.ErrorContains(t, cfg.Validate(), "insecure: true")

	cfg, err = ConfigFromArgs([]string{"--listen", "0.0.0.0:1433", "--insecure"}, io.Discard)
	require.NoError(t, err)
	assert.True(t, cfg.Insecure)
	assert.NoError(t, cfg.Validate())
}

// TestTLSWithoutClientCABeyondLoopbackIsRefused: server-only TLS lets any
// host that reaches the port ask, as plaintext does; it needs insecure too.
func TestTLSWithoutClientCABeyondLoopbackIsRefused(t *testing.T) {
	serverOnly := []string{"--listen", "0.0.0.0:1433", "--tls-cert-file", "/c.pem", "--tls-key-file", "/k.pem"}
	cfg, err := ConfigFromArgs(serverOnly, io.Discard)
	require.NoError(t, err)
	assert.ErrorContains(t, cfg.Validate(), "client_ca_file")

	cfg, err = ConfigFromArgs(append(serverOnly, "--tls-client-ca-file", "/ca.pem"), io.Discard)
	require.NoError(t, err)
	assert.NoError(t, cfg.Validate())

	cfg, err = ConfigFromArgs([]string{"--listen", "127.0.0.1:1433", "--tls-cert-file", "/c.pem", "--tls-key-file", "/k.pem"}, io.Discard)
	require.NoError(t, err)
	assert.NoError(t, cfg.Validate(), "loopback: only this host's users reach it")
}

func TestAllowedClientsNeedClientCertificates(t *testing.T) {
	cfg, err := ConfigFromArgs([]string{"--allowed-clients", "gpotel-collector, ", "--tls-cert-file", "/c.pem", "--tls-key-file", "/k.pem"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"gpotel-collector"}, cfg.AllowedClients)
	assert.ErrorContains(t, cfg.Validate(), "allowed_clients needs tls.client_ca_file")

	cfg.AllowedClients = append(cfg.AllowedClients, " ")
	cfg.TLS.ClientCAFile = "/ca.pem"
	assert.ErrorContains(t, cfg.Validate(), "allowed_clients[1] is empty")
}
