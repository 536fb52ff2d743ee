// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strconv"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

// delayColumns show where a session's processes waited inside the window,
// beside RUNQ (waiting for a CPU): for block I/O, and for memory (swap-in,
// reclaim, thrashing, compaction). Both need kernel.task_delayacct=1 on the
// hosts; the memory waits also need the agents to read taskstats.
var delayColumns = []column{
	{"IOWAIT", 7, true, func(r SessionRow) string { return formatSeconds(r.BlkioDelay) }},
	{"MEMWAIT", 7, true, func(r SessionRow) string { return formatSeconds(r.MemoryDelay) }},
}

func init() { columns = append(columns, delayColumns...) }

// SessionDelays are the delay-accounting waits of one session in the window, seconds.
type SessionDelays struct {
	BlkioDelay  float64
	MemoryDelay float64 // swap-in + reclaim + thrashing + compaction
}

func delaysFromStat(st *yagpcc.SystemStat) SessionDelays {
	return SessionDelays{
		BlkioDelay: st.GetBlkioDelaySeconds(),
		MemoryDelay: st.GetSwapinDelaySeconds() + st.GetFreepagesDelaySeconds() +
			st.GetThrashingDelaySeconds() + st.GetCompactDelaySeconds(),
	}
}

func formatSeconds(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "s" }
