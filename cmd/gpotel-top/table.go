// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/charmbracelet/x/ansi"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// SortKey is the column the session list is ordered by, largest first.
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

var sortKeyNames = map[SortKey]string{
	SortCPU:      "cpu",
	SortMemory:   "memory",
	SortRead:     "read",
	SortWrite:    "write",
	SortRunDelay: "delay",
	SortSkew:     "skew",
	SortSmoothed: "avg",
	SortSpill:    "spill",
}

func (k SortKey) String() string { return sortKeyNames[k] }

// sortKeyForKey maps a key press to a sort order; ok is false for other keys.
func sortKeyForKey(key string) (SortKey, bool) {
	switch key {
	case "c":
		return SortCPU, true
	case "m":
		return SortMemory, true
	case "r":
		return SortRead, true
	case "w":
		return SortWrite, true
	case "d":
		return SortRunDelay, true
	case "s":
		return SortSkew, true
	case "a":
		return SortSmoothed, true
	case "p":
		return SortSpill, true
	}
	return 0, false
}

// parseSortKey accepts the names printed by String and their one-letter keys.
func parseSortKey(s string) (SortKey, error) {
	if k, ok := sortKeyForKey(s); ok {
		return k, nil
	}
	for k, name := range sortKeyNames {
		if name == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown sort %q: want cpu, memory, read, write, delay, skew, avg or spill", s)
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

// SessionRow is one session as the table shows it, rates already divided by the window.
type SessionRow struct {
	SessID      int64
	TmID        int64
	User        string
	Database    string
	State       string
	CPUPercent  float64 // window CPU seconds ÷ window span × 100
	RSSAnon     uint64  // private resident bytes, all hosts
	RSS         uint64  // resident bytes, all hosts
	ReadPerSec  float64 // storage read bytes per second over the window
	WritePerSec float64
	RunDelay    float64 // seconds spent waiting for a CPU inside the window
	SessionDelays
	WindowSecond float64
	Partial      bool
	Query        string // the first line of the running query
	// RunningQuery is the running query's key, what k cancels; nil: none.
	RunningQuery *yagpcc.QueryKey
	// CPUSkew is 1 - avg/max of CPU over the segments in the window, with
	// its hottest segment (nil: no segment used CPU).
	CPUSkew float64
	Hottest *int32
	// AvgCPU is the smoothed CPU in cores at the shortest time constant;
	// HasAvg is false when the server sends no smoothed figures.
	AvgCPU float64
	HasAvg bool
	// Greenplum's own figures: workfile bytes held now, the session
	// holding the lock this one waits for (0: none), and the server's
	// vmem account (HasVmem false where it keeps none; from GetClusterTop).
	SpillBytes int64
	BlockedBy  int64
	Vmem       uint64
	HasVmem    bool
	// BlockChain is who blocks whom from this session on: "<12<7" waits
	// for 12, which waits for 7 (markBlockChains).
	BlockChain string
}

// rowFromState reads the last-window figures of one session.
func rowFromState(s *yagpcc.SessionState) SessionRow {
	row := SessionRow{
		SessID: s.GetSessionKey().GetSessId(),
		TmID:   s.GetSessionKey().GetTmId(),
	}
	info := s.GetSessionInfo()
	row.User = info.GetUser()
	row.Database = info.GetDatabase()
	row.State = info.GetState()
	if row.User == "" {
		row.User = s.GetRunningQueryInfo().GetUserName()
	}
	if row.Database == "" {
		row.Database = s.GetRunningQueryInfo().GetDatabaseName()
	}
	row.Query = firstLine(s.GetRunningQueryInfo().GetQueryText())
	row.RunningQuery = s.GetRunningQuery()
	row.BlockedBy = info.GetBlockedBySessId()
	row.SpillBytes = s.GetLastMetrics().GetSpill().GetTotalBytes()

	st := s.GetLastMetrics().GetSystemStat()
	row.WindowSecond = st.GetWindowSeconds()
	row.RSSAnon = st.GetRssAnon()
	row.RSS = st.GetRss()
	row.RunDelay = st.GetRunDelaySeconds()
	row.SessionDelays = delaysFromStat(st)
	row.Partial = st.GetPartial()
	row.CPUSkew, row.Hottest = st.GetCpuSkew(), st.CpuHottestSegment
	if avgs := s.GetProcAvg(); len(avgs) > 0 {
		row.AvgCPU, row.HasAvg = avgs[0].GetCpuCores(), true // shortest time constant first
	}
	if w := row.WindowSecond; w > 0 {
		row.CPUPercent = (st.GetUserTimeSeconds() + st.GetKernelTimeSeconds()) / w * 100
		row.ReadPerSec = float64(st.GetReadBytes()) / w
		row.WritePerSec = float64(st.GetWriteBytes()) / w
	}
	return row
}

// firstLine is the query's first non-empty line with tabs and other control
// characters made spaces: a terminal widens a tab, so it would break the cut
// to the screen width.
func firstLine(q string) string {
	q = strings.TrimSpace(q)
	if i := strings.IndexAny(q, "\r\n"); i >= 0 {
		q = strings.TrimSpace(q[:i])
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, q)
}

// sortValue is the figure the key orders by.
func (r SessionRow) sortValue(k SortKey) float64 {
	switch k {
	case SortMemory:
		return float64(r.RSSAnon)
	case SortRead:
		return r.ReadPerSec
	case SortWrite:
		return r.WritePerSec
	case SortRunDelay:
		return r.RunDelay
	case SortSkew:
		if r.CPUPercent < 5 {
			return 0
		}
		return r.CPUSkew
	case SortSmoothed:
		return r.AvgCPU
	case SortSpill:
		return float64(r.SpillBytes)
	}
	return r.CPUPercent
}

// sortRows orders largest first; ties fall back to the session key so the
// table does not shuffle between refreshes.
func sortRows(rows []SessionRow, k SortKey) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i].sortValue(k), rows[j].sortValue(k)
		if a != b {
			return a > b
		}
		if rows[i].TmID != rows[j].TmID {
			return rows[i].TmID > rows[j].TmID
		}
		return rows[i].SessID < rows[j].SessID
	})
}

type column struct {
	title string
	width int
	right bool
	value func(SessionRow) string
}

var columns = []column{
	{"SESS", 7, true, func(r SessionRow) string { return strconv.FormatInt(r.SessID, 10) }},
	{"USER", 10, false, func(r SessionRow) string { return r.User }},
	{"DATABASE", 10, false, func(r SessionRow) string { return r.Database }},
	{"STATE", 8, false, func(r SessionRow) string { return r.State }},
	{"CPU%", 7, true, func(r SessionRow) string {
		if r.WindowSecond <= 0 {
			return "-"
		}
		s := strconv.FormatFloat(r.CPUPercent, 'f', 1, 64)
		if r.Partial {
			s += "*"
		}
		return s
	}},
	{"AVG", 5, true, func(r SessionRow) string {
		if !r.HasAvg {
			return "-"
		}
		return strconv.FormatFloat(r.AvgCPU, 'f', 2, 64)
	}},
	{"SKEW", 7, true, func(r SessionRow) string { return skewText(r.CPUSkew, r.Hottest) }},
	{"PRIV", 8, true, func(r SessionRow) string { return formatBytes(float64(r.RSSAnon)) }},
	{"RSS", 8, true, func(r SessionRow) string { return formatBytes(float64(r.RSS)) }},
	{"READ/s", 8, true, func(r SessionRow) string { return rateOrDash(r, r.ReadPerSec) }},
	{"WRITE/s", 8, true, func(r SessionRow) string { return rateOrDash(r, r.WritePerSec) }},
	{"RUNQ", 7, true, func(r SessionRow) string { return strconv.FormatFloat(r.RunDelay, 'f', 2, 64) + "s" }},
	{"SPILL", 7, true, func(r SessionRow) string { return formatBytes(float64(r.SpillBytes)) }},
	{"VMEM", 7, true, func(r SessionRow) string {
		if !r.HasVmem {
			return "-"
		}
		return formatBytes(float64(r.Vmem))
	}},
	// The chain of sessions holding the locks this one waits for.
	{"BLOCKED", 12, true, func(r SessionRow) string { return r.BlockChain }},
}

// maxChainHops bounds how far a chain is followed: a wait cycle (a
// deadlock before the server breaks it) must not loop.
const maxChainHops = 4

// markBlockChains writes each blocked row's chain: the session it waits
// for, the one that one waits for, and so on, "…" past maxChainHops or
// at a session seen already in the chain.
func markBlockChains(rows []SessionRow) {
	blockedBy := map[[2]int64]int64{}
	for _, r := range rows {
		if r.BlockedBy != 0 {
			blockedBy[[2]int64{r.TmID, r.SessID}] = r.BlockedBy
		}
	}
	for i := range rows {
		var b strings.Builder
		seen := map[int64]bool{rows[i].SessID: true}
		for next, hops := rows[i].BlockedBy, 0; next != 0; next, hops = blockedBy[[2]int64{rows[i].TmID, next}], hops+1 {
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

// addVmem puts GetClusterTop's vmem figures on the rows of the sessions it lists.
func addVmem(rows []SessionRow, top *gpotelv1.GetClusterTopResponse) {
	vmem := map[[2]int64]uint64{}
	for _, s := range top.GetSessions() {
		if s.VmemBytes != nil {
			vmem[[2]int64{s.GetTmId(), s.GetSessId()}] = s.GetVmemBytes()
		}
	}
	for i := range rows {
		rows[i].Vmem, rows[i].HasVmem = vmem[[2]int64{rows[i].TmID, rows[i].SessID}]
	}
}

func rateOrDash(r SessionRow, v float64) string {
	if r.WindowSecond <= 0 {
		return "-"
	}
	return formatBytes(v)
}

// formatBytes prints binary units the way top does: 4096 → 4.0K.
func formatBytes(v float64) string {
	const units = "KMGTPE"
	if v < 1024 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	i := -1
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + string(units[i])
}

// formatTable renders the header and rows as plain text at most width cells
// wide; the query column takes what the fixed columns leave.
func formatTable(rows []SessionRow, width int) string {
	var b strings.Builder
	line := func(cells []string) {
		s := strings.Join(cells, " ")
		if width > 0 {
			s = ansi.Truncate(s, width, "")
		}
		b.WriteString(strings.TrimRight(s, " "))
		b.WriteByte('\n')
	}
	cells := make([]string, 0, len(columns)+1)
	for _, c := range columns {
		cells = append(cells, pad(c.title, c.width, c.right))
	}
	line(append(cells, "QUERY"))
	for _, r := range rows {
		cells = cells[:0]
		for _, c := range columns {
			cells = append(cells, pad(c.value(r), c.width, c.right))
		}
		line(append(cells, r.Query))
	}
	return b.String()
}

// pad cuts or fills s to exactly w cells.
func pad(s string, w int, right bool) string {
	s = ansi.Truncate(s, w, "")
	gap := strings.Repeat(" ", w-ansi.StringWidth(s))
	if right {
		return gap + s
	}
	return s + gap
}

// summary is the status line above the table.
func summary(addr string, rows []SessionRow, k SortKey) string {
	window := 0.0
	partial := 0
	for _, r := range rows {
		window = max(window, r.WindowSecond)
		if r.Partial {
			partial++
		}
	}
	s := fmt.Sprintf("gpotel-top %s  sessions %d  window %.0fs  sort %s", addr, len(rows), window, k)
	if partial > 0 {
		s += fmt.Sprintf("  partial %d (* = a host did not answer)", partial)
	}
	return s
}
