// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

// Fallbacks when the agent cannot read its own auxiliary vector: USER_HZ has
// been 100 on every Linux architecture gpotel runs on.
const fallbackClkTck = 100

// SelfAuxvPath is where the agent reads its own auxiliary vector. It is the
// agent's real procfs, not the configured root: the constants are the
// kernel's, and a fixture tree has no "self".
const SelfAuxvPath = "/proc/self/auxv"

// HostConfig says where ReadHost looks.
type HostConfig struct {
	Root     string // procfs root: <root>/stat and <root>/sys/kernel/osrelease
	AuxvPath string // default SelfAuxvPath
	Hostname string // overrides os.Hostname when set
}

// ReadHost reads the constants a caller needs to convert this host's kernel
// units. Boot time is read once: the kernel derives btime from the current
// clock, and a value that moved by a second between reads would shift every
// process's start time.
func ReadHost(cfg HostConfig, logger *zap.Logger) (*yagpcc.ProcHost, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	host := &yagpcc.ProcHost{ClkTck: fallbackClkTck, PageSize: int64(os.Getpagesize())}
	auxvPath := cfg.AuxvPath
	if auxvPath == "" {
		auxvPath = SelfAuxvPath
	}
	if raw, err := os.ReadFile(auxvPath); err != nil {
		logger.Warn("cannot read the auxiliary vector; assuming CLK_TCK 100 and the Go runtime's page size",
			zap.String("path", auxvPath), zap.Error(err))
	} else if auxv, err := ParseAuxv(raw); err != nil {
		logger.Warn("cannot parse the auxiliary vector; assuming CLK_TCK 100 and the Go runtime's page size",
			zap.String("path", auxvPath), zap.Error(err))
	} else {
		host.ClkTck, host.PageSize = auxv.ClkTck, auxv.PageSize
	}

	statPath := filepath.Join(cfg.Root, "stat")
	raw, err := os.ReadFile(statPath)
	if err != nil {
		return nil, fmt.Errorf("boot time: %w", err)
	}
	if host.BootTimeUnix, err = ParseBootTime(raw); err != nil {
		return nil, fmt.Errorf("boot time: %s: %w", statPath, err)
	}

	releasePath := filepath.Join(cfg.Root, "sys", "kernel", "osrelease")
	if raw, err := os.ReadFile(releasePath); err != nil {
		logger.Warn("cannot read the kernel release", zap.String("path", releasePath), zap.Error(err))
	} else {
		host.KernelRelease = string(bytes.TrimSpace(raw))
	}

	host.Hostname = cfg.Hostname
	if host.Hostname == "" {
		if host.Hostname, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("hostname: %w", err)
		}
	}
	return host, nil
}

// ParseBootTime finds the "btime <seconds>" line of /proc/stat.
func ParseBootTime(b []byte) (int64, error) {
	for len(b) > 0 {
		line := b
		if nl := bytes.IndexByte(b, '\n'); nl >= 0 {
			line, b = b[:nl], b[nl+1:]
		} else {
			b = nil
		}
		if rest, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			v, ok := parseInt(trimSpace(rest))
			if !ok || v <= 0 {
				return 0, kerneltext.ShapeError("stat: btime %q is not a positive number", rest)
			}
			return v, nil
		}
	}
	return 0, kerneltext.ShapeError("stat: no btime line")
}
