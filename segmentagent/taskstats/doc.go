// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package taskstats reads the Linux taskstats interface over generic netlink:
// per-task records of live processes (Client.Task, Client.Tasks for many at
// once, Client.Group) and the final record of every task that exits
// (Listener). Every TASKSTATS_CMD_GET needs CAP_NET_ADMIN. (cgroup v1
// task-state counts, CGROUPSTATS_CMD_GET, are segmentagent/cgroup's
// StatsClient.)
//
// Why github.com/mdlayher/genetlink and our own decoder, not
// github.com/mdlayher/taskstats: that package has no exit listener (it never
// sends TASKSTATS_CMD_ATTR_REGISTER_CPUMASK), it casts the kernel's bytes to
// unix.Taskstats through unsafe.Pointer without checking the length, so a
// kernel whose struct is shorter than x/sys's (any kernel older than the
// x/sys headers) is read past the end of the attribute, and it keeps only a
// few fields (no I/O, no delays beyond three). genetlink and netlink are the
// same author's well-kept socket layers (used by mdlayher/taskstats itself,
// by Tailscale and by the Prometheus node exporter's wifi collector): they
// open the socket, resolve the family and carry the listener's and Group's
// messages. Client.Tasks writes and reads that socket itself: one write
// carries up to maxInFlight requests, each reply is read into one reused
// buffer and matched to its request by sequence number, a reply the kernel
// dropped is the pid's own error, and reading never waits (the kernel
// answers inside the write). DecodeMessage is the one decoder of struct
// taskstats: it walks the netlink attributes in place, reads each field only
// when the struct's version has it and the bytes hold it, and skips a
// truncated, oversized or unknown-version message with a reason, never a
// panic (FuzzDecodeMessage; FuzzWindowTake for the reply framing).
//
// Values stay in the kernel's units (µs for utime/stime/etime, ns for run
// totals and delays, KiB for high-water marks); internal/kernelunits converts.
package taskstats
