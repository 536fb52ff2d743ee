// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// SortKey is the figure the lists are ordered by, largest first.
type SortKey int

const (
	SortCPU SortKey = iota
	SortMemory
	SortRead
	SortWrite
	SortRunDelay
	SortSkew     // CPU skew over the segments; under 5 % CPU counts as 0 (noise)
	SortSmoothed // the smoothed CPU at the shortest time constant
	SortSpill    // Greenplum workfile bytes held now
)

// sortKeys is each sort's key, name and what the help says of it, in key order.
var sortKeys = []struct {
	key   SortKey
	press string
	name  string
	what  string
}{
	{SortCPU, "c", "cpu", "CPU over the window"},
	{SortMemory, "m", "memory", "private memory"},
	{SortRead, "r", "read", "storage reads per second"},
	{SortWrite, "w", "write", "storage writes per second"},
	{SortRunDelay, "d", "delay", "run-queue wait"},
	{SortSkew, "s", "skew", "CPU skew over the segments (under 5 % CPU counts as none)"},
	{SortSmoothed, "a", "avg", "smoothed CPU"},
	{SortSpill, "p", "spill", "workfiles held (Greenplum)"},
}

func (k SortKey) String() string {
	for _, s := range sortKeys {
		if s.key == k {
			return s.name
		}
	}
	return strconv.Itoa(int(k))
}

// sortKeyForKey maps a key press to a sort order; ok is false for other keys.
func sortKeyForKey(key string) (SortKey, bool) {
	for _, s := range sortKeys {
		if s.press == key {
			return s.key, true
		}
	}
	return 0, false
}

// parseSortKey accepts the names printed by String and their one-letter keys.
func parseSortKey(s string) (SortKey, error) {
	names := make([]string, 0, len(sortKeys))
	for _, k := range sortKeys {
		if k.name == s || k.press == s {
			return k.key, nil
		}
		names = append(names, k.name)
	}
	return 0, fmt.Errorf("unknown sort %q: want one of %s", s, strings.Join(names, ", "))
}

// serverField is the GetGPSessions sort field matching the key, so a server that
// pages returns the same top sessions the client shows.
func (k SortKey) serverField() yagpcc.SessionField {
	switch k {
	case SortMemory:
		return yagpcc.SessionField_LAST_RSS_ANON
	case SortRead:
		return yagpcc.SessionField_LAST_READ_BYTES
	case SortWrite:
		return yagpcc.SessionField_LAST_WRITE_BYTES
	case SortRunDelay:
		return yagpcc.SessionField_LAST_RUN_DELAY_SECONDS
	case SortSpill:
		return yagpcc.SessionField_LAST_SPILL_TOTALBYTES
	}
	return yagpcc.SessionField_LAST_RUNNINGTIMESECONDS
}

// sessionKey names a session for the life of a cluster.
type sessionKey struct{ tmID, sessID int64 }

// SessionRow is one session as the lists show it, rates already divided by
// the window. A figure the API leaves absent has its Has… false.
type SessionRow struct {
	Key      sessionKey
	User     string
	Database string
	State    string
	App      string
	Query    string           // the statement on one line
	Running  *yagpcc.QueryKey // the running query, what k cancels; nil: none
	System   bool
	Seen     time.Time // the newest snapshot that held the session
	// Ended: the newest snapshot no longer holds it (kept for the grace period).
	Ended bool
	// Own: one of the collector's own connections, as GetClusterTop marks
	// it (by backend pid); never by application_name, which anyone sets.
	Own bool

	// The window figures (last_metrics); HasWindow false: absent.
	HasWindow   bool
	Window      float64
	CPU         float64 // cores: CPU seconds ÷ window
	ReadPerSec  float64
	WritePerSec float64
	RunDelay    float64 // processes waiting for a CPU, on average
	IOWait      float64 // processes waiting for block I/O
	MemoryWait  float64 // processes waiting for memory: swap-in, reclaim, thrashing, compaction
	RSSAnon     uint64
	RSS         uint64
	Partial     bool
	CPUSkew     float64
	Hottest     *int32 // the segment that used the most CPU; nil: none used any
	Processes   uint32
	Hosts       uint32
	// The waits the hosts measure (schedstat, kernel.task_delayacct);
	// false: the API leaves them absent.
	HasRunDelay, HasIOWait, HasMemoryWait bool

	// AvgCPU is the smoothed CPU in cores at the shortest time constant.
	AvgCPU float64
	HasAvg bool
	// Greenplum's own figures: workfile bytes held now, the session
	// holding the lock this one waits for (0: none), and the server's
	// vmem account (from GetClusterTop).
	Spill      int64
	HasSpill   bool
	BlockedBy  int64
	Vmem       uint64
	HasVmem    bool
	BlockChain string  // "<12<7": waits for 12, which waits for 7
	Blocks     []int64 // the sessions waiting for a lock this one holds
	// RuleMark is the newest workload rule's action done on it: "cancel
	// runaway-spill"; "": none (among the latest firings).
	RuleMark string

	// state is the API's whole answer, for the details page.
	state *yagpcc.SessionState
}

// rowFromState reads one session of GetGPSessions. Every part of the
// answer may be absent; what is absent stays absent.
func rowFromState(s *yagpcc.SessionState) SessionRow {
	info := s.GetSessionInfo()
	row := SessionRow{
		Key:       sessionKey{s.GetSessionKey().GetTmId(), s.GetSessionKey().GetSessId()},
		User:      info.GetUser(),
		Database:  info.GetDatabase(),
		State:     info.GetState(),
		App:       info.GetApplicationName(),
		Query:     oneLine(s.GetRunningQueryInfo().GetQueryText()),
		Running:   s.GetRunningQuery(),
		System:    info.GetSystem(),
		BlockedBy: info.GetBlockedBySessId(),
		state:     s,
	}
	if s.GetTime() != nil {
		row.Seen = s.GetTime().AsTime()
	}
	if row.User == "" {
		row.User = s.GetRunningQueryInfo().GetUserName()
	}
	if row.Database == "" {
		row.Database = s.GetRunningQueryInfo().GetDatabaseName()
	}
	if spill := s.GetLastMetrics().GetSpill(); spill != nil {
		row.Spill, row.HasSpill = spill.GetTotalBytes(), true
	}
	if avgs := s.GetProcAvg(); len(avgs) > 0 {
		row.AvgCPU, row.HasAvg = avgs[0].GetCpuCores(), true // shortest time constant first
	}
	st := s.GetLastMetrics().GetSystemStat()
	if st == nil {
		return row
	}
	row.RSSAnon, row.RSS = st.GetRssAnon(), st.GetRss()
	row.Partial = st.GetPartial()
	row.Processes, row.Hosts = st.GetProcesses(), st.GetHosts()
	if w := st.GetWindowSeconds(); w > 0 {
		row.HasWindow, row.Window = true, w
		row.CPU = (st.GetUserTimeSeconds() + st.GetKernelTimeSeconds()) / w
		row.ReadPerSec = float64(st.GetReadBytes()) / w
		row.WritePerSec = float64(st.GetWriteBytes()) / w
		row.RunDelay, row.HasRunDelay = st.GetRunDelaySeconds()/w, st.RunDelaySeconds != nil
		row.IOWait, row.HasIOWait = st.GetBlkioDelaySeconds()/w, st.BlkioDelaySeconds != nil
		memory, ok := memoryWaits(st)
		row.MemoryWait, row.HasMemoryWait = memory/w, ok
		row.CPUSkew, row.Hottest = st.GetCpuSkew(), st.CpuHottestSegment
	}
	return row
}

// memoryWaits is the seconds waited for memory (swap-in, reclaim,
// thrashing, compaction); false when the API has none of them.
func memoryWaits(st *yagpcc.SystemStat) (float64, bool) {
	sum, measured := 0.0, false
	for _, w := range []*float64{st.SwapinDelaySeconds, st.FreepagesDelaySeconds, st.ThrashingDelaySeconds, st.CompactDelaySeconds} {
		if w != nil {
			sum, measured = sum+*w, true
		}
	}
	return sum, measured
}

// sortValue is the figure the key orders by; an absent one sorts last.
func (r SessionRow) sortValue(k SortKey) float64 {
	const absent = -1
	window := func(v float64) float64 {
		if !r.HasWindow {
			return absent
		}
		return v
	}
	switch k {
	case SortMemory:
		if r.state.GetLastMetrics().GetSystemStat() == nil {
			return absent
		}
		return float64(r.RSSAnon)
	case SortRead:
		return window(r.ReadPerSec)
	case SortWrite:
		return window(r.WritePerSec)
	case SortRunDelay:
		if !r.HasRunDelay {
			return absent
		}
		return window(r.RunDelay)
	case SortSkew:
		if r.CPU < 0.05 {
			return window(0)
		}
		return window(r.CPUSkew)
	case SortSmoothed:
		if !r.HasAvg {
			return absent
		}
		return r.AvgCPU
	case SortSpill:
		if !r.HasSpill {
			return absent
		}
		return float64(r.Spill)
	}
	return window(r.CPU)
}

// sortRows puts the live sessions first, largest first; ended ones after
// them, the latest to end first. Ties fall back to the session key so the
// list does not shuffle between refreshes.
func sortRows(rows []SessionRow, k SortKey) {
	slices.SortStableFunc(rows, func(a, b SessionRow) int {
		switch {
		case a.Ended != b.Ended:
			if a.Ended {
				return 1
			}
			return -1
		case a.Ended && !a.Seen.Equal(b.Seen):
			return b.Seen.Compare(a.Seen)
		}
		if va, vb := a.sortValue(k), b.sortValue(k); va != vb {
			if va > vb {
				return -1
			}
			return 1
		}
		if a.Key.tmID != b.Key.tmID {
			return int(b.Key.tmID - a.Key.tmID)
		}
		return int(a.Key.sessID - b.Key.sessID)
	})
}

// markEnded marks the sessions the newest snapshot does not hold: those
// seen before it. newest is the cluster's snapshot time (zero: unknown),
// asked before the sessions, so that a list of nothing but ended sessions
// is told apart; a session seen later moves it on.
func markEnded(rows []SessionRow, newest time.Time) {
	for _, r := range rows {
		if r.Seen.After(newest) {
			newest = r.Seen
		}
	}
	for i := range rows {
		rows[i].Ended = !rows[i].Seen.IsZero() && rows[i].Seen.Before(newest)
	}
}

// maxChainHops bounds how far a chain is followed: a wait cycle (a
// deadlock before the server breaks it) must not loop.
const maxChainHops = 4

// markBlockChains writes each blocked row's chain (the session it waits
// for, the one that one waits for, and so on, "…" past maxChainHops or at
// a session seen already in the chain) and each row's Blocks.
func markBlockChains(rows []SessionRow) {
	blockedBy := map[sessionKey]int64{}
	blocks := map[sessionKey][]int64{}
	for _, r := range rows {
		if r.BlockedBy != 0 && !r.Ended {
			blockedBy[r.Key] = r.BlockedBy
			holder := sessionKey{r.Key.tmID, r.BlockedBy}
			blocks[holder] = append(blocks[holder], r.Key.sessID)
		}
	}
	for i := range rows {
		rows[i].Blocks = blocks[rows[i].Key]
		slices.Sort(rows[i].Blocks)
		if rows[i].Ended {
			continue
		}
		var b strings.Builder
		seen := map[int64]bool{rows[i].Key.sessID: true}
		for next, hops := rows[i].BlockedBy, 0; next != 0; next, hops = blockedBy[sessionKey{rows[i].Key.tmID, next}], hops+1 {
			if hops == maxChainHops || seen[next] {
				b.WriteString("…")
				break
			}
			seen[next] = true
			b.WriteString("<" + strconv.FormatInt(next, 10))
		}
		rows[i].BlockChain = b.String()
	}
}

// addClusterTop puts what GetClusterTop says of the sessions it lists on
// their rows: the vmem figures, and which are the collector's own (it lists
// every one of those whatever the limit). A session it does not list is
// not the collector's: without the answer nothing is hidden.
func addClusterTop(rows []SessionRow, top *gpotelv1.GetClusterTopResponse) {
	byKey := map[sessionKey]*gpotelv1.SessionTop{}
	for _, s := range top.GetSessions() {
		byKey[sessionKey{s.GetTmId(), s.GetSessId()}] = s
	}
	for i := range rows {
		s, listed := byKey[rows[i].Key]
		rows[i].Own = s.GetOwn()
		rows[i].Vmem, rows[i].HasVmem = s.GetVmemBytes(), listed && s.VmemBytes != nil
	}
}

// stateText is the session's state in at most 8 cells.
func (r SessionRow) stateText() string {
	if r.Ended {
		return "ended"
	}
	switch r.State {
	case "idle in transaction":
		return "idle tx"
	case "idle in transaction (aborted)":
		return "aborted"
	case "fastpath function call":
		return "fastpath"
	}
	return r.State
}

// sessionColumns are the session list's figures; the query takes the rest.
// A figure of an ended session is absent: it is not what it uses now.
func sessionColumns(capa capacity) table[SessionRow] {
	window := func(f func(SessionRow) string) func(SessionRow) string {
		return func(r SessionRow) string {
			if !r.HasWindow || r.Ended {
				return absentText
			}
			return f(r)
		}
	}
	wait := func(v func(SessionRow) (float64, bool)) func(SessionRow) string {
		return window(func(r SessionRow) string {
			if w, ok := v(r); ok {
				return percentText(w * 100)
			}
			return absentText
		})
	}
	rate := func(v func(SessionRow) float64) func(SessionRow) string {
		return window(func(r SessionRow) string { return bytesText(v(r)) })
	}
	memory := func(v func(SessionRow) uint64) func(SessionRow) string {
		return window(func(r SessionRow) string { return bytesText(float64(v(r))) })
	}
	return table[SessionRow]{
		columns: []column[SessionRow]{
			{"SESS", 7, false, 0, func(r SessionRow) string { return strconv.FormatInt(r.Key.sessID, 10) }},
			{"USER", 9, true, 1, func(r SessionRow) string { return r.User }},
			{"DATABASE", 9, true, 8, func(r SessionRow) string { return r.Database }},
			{"STATE", 8, true, 2, SessionRow.stateText},
			{"CPU%", 6, false, 0, window(func(r SessionRow) string {
				s := cpuText(r.CPU, capa.cluster)
				if r.Partial {
					s += "*"
				}
				return s
			})},
			{"AVG%", 6, false, 10, func(r SessionRow) string {
				if !r.HasAvg || r.Ended {
					return absentText
				}
				return cpuText(r.AvgCPU, capa.cluster)
			}},
			{"RD/s", 5, false, 4, rate(func(r SessionRow) float64 { return r.ReadPerSec })},
			{"WR/s", 5, false, 4, rate(func(r SessionRow) float64 { return r.WritePerSec })},
			{"SPILL", 5, false, 5, func(r SessionRow) string {
				if !r.HasSpill || r.Ended {
					return absentText
				}
				return bytesText(float64(r.Spill))
			}},
			{"BLOCKED", 8, true, 3, func(r SessionRow) string { return r.BlockChain }},
			{ruleColumn, 10, true, 6, func(r SessionRow) string { return r.RuleMark }},
			{"PRIV", 5, false, 9, memory(func(r SessionRow) uint64 { return r.RSSAnon })},
			{"RSS", 5, false, 14, memory(func(r SessionRow) uint64 { return r.RSS })},
			{"VMEM", 5, false, 13, func(r SessionRow) string {
				if !r.HasVmem || r.Ended {
					return absentText
				}
				return bytesText(float64(r.Vmem))
			}},
			{"RUNQ%", 6, false, 11, wait(func(r SessionRow) (float64, bool) { return r.RunDelay, r.HasRunDelay })},
			{"IOW%", 5, false, 15, wait(func(r SessionRow) (float64, bool) { return r.IOWait, r.HasIOWait })},
			{"MEMW%", 5, false, 16, wait(func(r SessionRow) (float64, bool) { return r.MemoryWait, r.HasMemoryWait })},
			{"SKEW", 7, false, 12, window(func(r SessionRow) string { return skewText(r.CPUSkew, r.Hottest) })},
		},
		textTitle: "QUERY",
		text:      func(r SessionRow) string { return r.Query },
		textMin:   16,
		wide:      map[string]int{"USER": 20, "DATABASE": 20, ruleColumn: 24},
	}
}

// skewText is a skew share and its hottest segment: "75%@3"; "-" without one.
func skewText(skew float64, hottest *int32) string {
	if hottest == nil {
		return absentText
	}
	return fmt.Sprintf("%.0f%%@%d", skew*100, *hottest)
}
