// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/groundtruth"
)

// Usage is what a process has cost so far: CPU seconds and resident memory now.
type Usage struct {
	CPUSeconds float64
	RSSBytes   uint64
}

// Minus is the CPU used since an earlier reading, with the newer memory.
func (u Usage) Minus(earlier Usage) Usage {
	return Usage{CPUSeconds: u.CPUSeconds - earlier.CPUSeconds, RSSBytes: u.RSSBytes}
}

// UsageOf reads a process's usage from /proc; an exited process reads as zero.
func UsageOf(pid int) Usage {
	p, err := groundtruth.Read(pid)
	if err != nil {
		return Usage{}
	}
	return Usage{CPUSeconds: p.CPUSeconds(), RSSBytes: p.RSSBytes}
}

// Usages reads the collector (key "collector") and every agent ("agent <host>").
func Usages(collector *Process, agents map[string]*Process) map[string]Usage {
	out := map[string]Usage{"collector": UsageOf(collector.PID())}
	for host, p := range agents {
		out["agent "+host] = UsageOf(p.PID())
	}
	return out
}

// DialAPI connects to a GetGPInfo endpoint without TLS.
func DialAPI(addr string) (yagpcc.GetGPInfoClient, func(), error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return yagpcc.NewGetGPInfoClient(conn), func() { _ = conn.Close() }, nil
}
