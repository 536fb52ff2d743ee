// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// queryMsg carries GetGPQuery's answer for the page that asked.
type queryMsg struct {
	asked *yagpcc.QueryKey
	data  *yagpcc.TotalQueryData
	err   error
}

func (m *topModel) fetchQuery(key *yagpcc.QueryKey) tea.Cmd {
	ctx, c := m.ctx, m.client
	return func() tea.Msg {
		data, err := c.query(ctx, key)
		return queryMsg{asked: key, data: data, err: err}
	}
}

// sessionPage is Enter on a session: who it is, what it waits for and
// blocks, its figures over the window and over its life, per host, its
// running query per segment, and the query's text whole.
type sessionPage struct {
	basePage
	of sessionKey
	// The running query's per-segment figures, for asked.
	asked *yagpcc.QueryKey
	query *yagpcc.TotalQueryData
	err   error
}

func openSession(m *topModel, key rowKey) (page, tea.Cmd) {
	p := &sessionPage{of: sessionKey{key.tmID, key.sessID}}
	return p, p.refresh(m)
}

func (p *sessionPage) title() string { return fmt.Sprintf("session %d", p.of.sessID) }

func (p *sessionPage) refresh(m *topModel) tea.Cmd {
	r := m.session(p.of)
	if r == nil || r.Running == nil || r.Ended {
		return nil
	}
	return m.fetchQuery(r.Running)
}

func (p *sessionPage) receive(msg tea.Msg) (page, tea.Cmd) {
	if q, ok := msg.(queryMsg); ok && sessionOf(q.asked) == p.of {
		next := *p
		next.asked, next.query, next.err = q.asked, q.data, q.err
		return &next, nil
	}
	return nil, nil
}

func sessionOf(k *yagpcc.QueryKey) sessionKey {
	return sessionKey{int64(k.GetTmid()), int64(k.GetSsid())}
}

func (p *sessionPage) target(m *topModel) (actionTarget, bool) {
	return sessionTarget(m, rowKey{tmID: p.of.tmID, sessID: p.of.sessID})
}

func (p *sessionPage) help(*topModel) []item {
	return []item{{0, "esc back"}, {0, "k cancel"}, {0, "K terminate"}, {1, "x memory"}, {0, "q quit"}}
}

func (p *sessionPage) impossible(m *topModel, c capacity) bool {
	r := m.session(p.of)
	if r == nil {
		return false
	}
	if r.HasWindow && !r.Ended && !possible(r.CPU, c.cluster) {
		return true
	}
	for _, h := range sessionTopOf(m.top, p.of).GetHosts() {
		if !possible(h.GetUsage().GetCpuCores(), c.host[h.GetHostname()]) {
			return true
		}
	}
	return segmentsImpossible(p.query, c)
}

// sessionTopOf is the cluster top's line of the session; nil when it has none.
func sessionTopOf(top *gpotelv1.GetClusterTopResponse, key sessionKey) *gpotelv1.SessionTop {
	for _, s := range top.GetSessions() {
		if s.GetTmId() == key.tmID && s.GetSessId() == key.sessID {
			return s
		}
	}
	return nil
}

func (p *sessionPage) lines(m *topModel, width int) []string {
	r := m.session(p.of)
	if r == nil {
		return paragraph(fmt.Sprintf("session %d is not in the collector's answer any more: it ended, and its grace period is over.", p.of.sessID), width)
	}
	capa := capacityOf(m.top)
	s := r.state
	info := s.GetSessionInfo()
	now := m.at
	state := r.stateText()
	if r.Ended {
		state = fmt.Sprintf("ended (last seen %s, %s before this answer)", clockText(r.Seen.Local()), durationText(now.Sub(r.Seen).Seconds()))
	}
	out := []string{
		field(fmt.Sprintf("session %d", r.Key.sessID),
			joinNonEmpty("  ", state, "tm_id "+strconv.FormatInt(r.Key.tmID, 10), pidText(info.GetPid()), info.GetBackendType()), width),
		field("user, database", r.User+", "+r.Database, width),
		field("application", valueOr(r.App), width),
		field("client", clientText(info), width),
		field("started", timeAgo(info.GetBackendStart(), now), width),
		field("transaction since", timeAgo(info.GetXactStart(), now), width),
		field("query since", timeAgo(info.GetQueryStart(), now), width),
		field("state since", timeAgo(info.GetStateChange(), now), width),
		field("waits for", valueOr(joinNonEmpty(" ", info.GetWaitEventType(), info.GetWaitEvent(), info.GetWaitingReason())), width),
		field("resource group", valueOr(info.GetRsgname()), width),
		field("lock", lockText(r, info), width),
		field("blocks", blocksText(r.Blocks), width),
		"",
	}
	out = append(out, p.figureLines(r, capa, width)...)
	out = append(out, "")
	out = append(out, hostLines("per host, over the window", sessionTopOf(m.top, p.of).GetHosts(), true, capa, width,
		"none: the collector's snapshotdiff has emit_session_host_figures off, or the session is not among the cluster top's")...)
	if r.Running != nil && !r.Ended {
		out = append(out, "")
		out = append(out, segmentLines("the running query per segment, since it started", p.query, p.err, capa, width)...)
	}
	out = append(out, "", "query"+queryState(r))
	return append(out, paragraph(valueOr(oneLine(s.GetRunningQueryInfo().GetQueryText())), width)...)
}

func queryState(r *SessionRow) string {
	if r.Running == nil || r.Ended {
		return " (the last one; it does not run now)"
	}
	return " (running)"
}

// figureLines: the window's figures beside the lifetime's.
func (p *sessionPage) figureLines(r *SessionRow, capa capacity, width int) []string {
	last := r.state.GetLastMetrics().GetSystemStat()
	life := r.state.GetTotalMetrics().GetSystemStat()
	windowTitle := "LAST " + constantText(r.Window)
	if r.Ended {
		windowTitle += " (as last seen)"
	}
	row := func(label string, f func(st *yagpcc.SystemStat, window float64) string) string {
		w, l := absentText, absentText
		if last != nil && r.HasWindow {
			w = f(last, r.Window)
		}
		if life != nil {
			l = f(life, 0)
		}
		return cutLine(fmt.Sprintf("%-22s %-30s %s", label, w, l), width)
	}
	pair := func(a, b float64, unit func(float64) string) string { return unit(a) + " / " + unit(b) }
	count := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	bytes := func(v float64) string { return bytesText(v) }
	out := []string{
		headerStyle.Render(cutLine(fmt.Sprintf("%-22s %-30s %s", "FIGURE", windowTitle, "LIFETIME (live processes)"), width)),
		row("CPU user / system", func(st *yagpcc.SystemStat, w float64) string {
			s := pair(st.GetUserTimeSeconds(), st.GetKernelTimeSeconds(), secondsText)
			if w > 0 {
				s += "  " + cpuPercent((st.GetUserTimeSeconds()+st.GetKernelTimeSeconds())/w, capa.cluster)
			}
			return s
		}),
		row("storage read / write", func(st *yagpcc.SystemStat, _ float64) string {
			return pair(float64(st.GetReadBytes()), float64(st.GetWriteBytes()), bytes)
		}),
		row("chars read / written", func(st *yagpcc.SystemStat, _ float64) string {
			return pair(float64(st.GetRchar()), float64(st.GetWchar()), bytes)
		}),
		row("read / write calls", func(st *yagpcc.SystemStat, _ float64) string {
			return pair(float64(st.GetSyscr()), float64(st.GetSyscw()), count)
		}),
		row("faults minor / major", func(st *yagpcc.SystemStat, _ float64) string {
			return pair(float64(st.GetMinorFaults()), float64(st.GetMajorFaults()), count)
		}),
		row("switches vol / invol", func(st *yagpcc.SystemStat, _ float64) string {
			return pair(float64(st.GetVoluntaryCtxtSwitches()), float64(st.GetNonvoluntaryCtxtSwitches()), count)
		}),
		row("run-queue wait", func(st *yagpcc.SystemStat, _ float64) string { return waitText(st.RunDelaySeconds) }),
		row("block I/O wait", func(st *yagpcc.SystemStat, _ float64) string { return waitText(st.BlkioDelaySeconds) }),
		row("memory wait", func(st *yagpcc.SystemStat, _ float64) string {
			if w, ok := memoryWaits(st); ok {
				return secondsText(w)
			}
			return absentText
		}),
	}
	memory := absentText
	if last != nil {
		memory = fmt.Sprintf("private %s  resident %s  largest host %s  in %s on %s", bytesText(float64(r.RSSAnon)), bytesText(float64(r.RSS)),
			bytesText(float64(last.GetRssMaxHost())), countText(int64(r.Processes), "process", "processes"), countText(int64(r.Hosts), "host", "hosts"))
		if r.Partial {
			memory += " (partial: a host did not answer)"
		}
	}
	if r.HasVmem {
		memory += "  vmem " + bytesText(float64(r.Vmem))
	}
	spill := absentText
	if sp := r.state.GetLastMetrics().GetSpill(); sp != nil {
		spill = fmt.Sprintf("%s in %d files", bytesText(float64(sp.GetTotalBytes())), sp.GetFileCount())
	}
	var smoothed []string
	for _, a := range r.state.GetProcAvg() {
		smoothed = append(smoothed, cpuPercent(a.GetCpuCores(), capa.cluster)+" over "+constantText(a.GetTimeConstantSeconds()))
	}
	return append(out,
		field("memory now", memory, width),
		field("spill now", spill, width),
		field("CPU smoothed", valueOr(strings.Join(smoothed, ", ")), width))
}

// waitText is a wait in seconds; absent where the hosts do not measure it.
func waitText(seconds *float64) string {
	if seconds == nil {
		return absentText
	}
	return secondsText(*seconds)
}

// hostLines is a per-host breakdown; withMemory: the usage carries memory
// and processes (a session's; a query's has none: its MEM and PROCS are
// absent, never 0).
func hostLines(title string, hosts []*gpotelv1.SessionHostUsage, withMemory bool, capa capacity, width int, none string) []string {
	if len(hosts) == 0 {
		return []string{title + ": " + none}
	}
	out := []string{title, headerStyle.Render(cutLine(fmt.Sprintf("  %-12s %6s %6s %6s %6s %6s", "HOST", "CPU%", "RD/s", "WR/s", "MEM", "PROCS"), width))}
	for _, h := range hosts {
		u := h.GetUsage()
		memory, processes := absentText, absentText
		if withMemory {
			memory, processes = bytesText(float64(u.GetRssBytes())), strconv.FormatUint(uint64(u.GetProcesses()), 10)
		}
		out = append(out, cutLine(fmt.Sprintf("  %-12s %6s %6s %6s %6s %6s", pad(h.GetHostname(), 12, false), cpuText(u.GetCpuCores(), capa.host[h.GetHostname()]),
			bytesText(u.GetReadBytesPerSecond()), bytesText(u.GetWriteBytesPerSecond()), memory, processes), width))
	}
	return out
}

// segmentLines is a query's figures per segment instance (content -1 is
// the coordinator), from GetGPQuery.
func segmentLines(title string, data *yagpcc.TotalQueryData, err error, capa capacity, width int) []string {
	switch {
	case status.Code(err) == codes.NotFound:
		return []string{title + ": none (the collector has no figures of this query: it has just started, or the snapshotdiff writes no query figures)"}
	case err != nil:
		return append([]string{title + ":"}, paragraph(err.Error(), width)...)
	case data == nil:
		return []string{title + ": asking…"}
	case len(data.GetSegmentQueryMetrics()) == 0:
		return []string{title + ": none (the collector has no per-segment figures of it)"}
	}
	duration := queryDuration(data.GetQueryStat())
	out := []string{title, headerStyle.Render(cutLine(fmt.Sprintf("  %4s %-12s %8s %6s %6s %6s", "SEG", "HOST", "CPU", "CPU%", "READ", "WRITE"), width))}
	segs := slices.Clone(data.GetSegmentQueryMetrics())
	slices.SortFunc(segs, func(a, b *yagpcc.SegmentMetrics) int {
		return int(a.GetSegmentKey().GetSegindex() - b.GetSegmentKey().GetSegindex())
	})
	for _, s := range segs {
		st := s.GetSegmentMetrics().GetSystemStat()
		cpu := st.GetUserTimeSeconds() + st.GetKernelTimeSeconds()
		if cpu == 0 {
			cpu = st.GetRunningTimeSeconds()
		}
		percent := absentText
		if duration > 0 {
			percent = cpuText(cpu/duration, capa.host[s.GetHostname()])
		}
		out = append(out, cutLine(fmt.Sprintf("  %4d %-12s %8s %6s %6s %6s",
			s.GetSegmentKey().GetSegindex(), pad(s.GetHostname(), 12, false), secondsText(cpu), percent,
			bytesText(float64(st.GetReadBytes())), bytesText(float64(st.GetWriteBytes()))), width))
	}
	return out
}

// queryDuration is how long the query has run (or ran), in seconds; 0: unknown.
func queryDuration(q *yagpcc.QueryStat) float64 {
	start := q.GetStartTime()
	if start == nil {
		start = q.GetQueryInfo().GetStartTime()
	}
	end := q.GetEndTime()
	if end == nil {
		end = q.GetCollectTime()
	}
	if start == nil || end == nil {
		return 0
	}
	return max(end.AsTime().Sub(start.AsTime()).Seconds(), 0)
}

func segmentsImpossible(data *yagpcc.TotalQueryData, c capacity) bool {
	d := queryDuration(data.GetQueryStat())
	if d <= 0 {
		return false
	}
	for _, s := range data.GetSegmentQueryMetrics() {
		st := s.GetSegmentMetrics().GetSystemStat()
		if !possible((st.GetUserTimeSeconds()+st.GetKernelTimeSeconds())/d, c.host[s.GetHostname()]) {
			return true
		}
	}
	return false
}

func pidText(pid int64) string {
	if pid == 0 {
		return ""
	}
	return "pid " + strconv.FormatInt(pid, 10)
}

func valueOr(s string) string {
	if s == "" {
		return absentText
	}
	return s
}

func clientText(info *yagpcc.SessionInfo) string {
	addr := info.GetClientAddr()
	if addr == "" {
		return "local (Unix socket)"
	}
	if info.GetClientPort() > 0 {
		addr += ":" + strconv.FormatInt(info.GetClientPort(), 10)
	}
	if h := info.GetClientHostname(); h != "" {
		addr += " (" + h + ")"
	}
	return addr
}

// timeAgo is a moment and how long before now it was.
func timeAgo(t *timestamppb.Timestamp, now time.Time) string {
	if t == nil {
		return absentText
	}
	at := t.AsTime()
	return fmt.Sprintf("%s (%s ago)", at.Local().Format("2006-01-02 15:04:05"), durationText(now.Sub(at).Seconds()))
}

// lockText is the lock the session waits for: its mode and object, the
// holder and its mode, and the chain.
func lockText(r *SessionRow, info *yagpcc.SessionInfo) string {
	if r.BlockedBy == 0 {
		return "waits for none"
	}
	return fmt.Sprintf("waits for %s on %s, held in %s by session %d (chain %s)", valueOr(info.GetWaitMode()), valueOr(info.GetLockedItem()),
		valueOr(info.GetLockedMode()), r.BlockedBy, r.BlockChain)
}

func blocksText(blocks []int64) string {
	if len(blocks) == 0 {
		return "none"
	}
	ids := make([]string, len(blocks))
	for i, b := range blocks {
		ids[i] = strconv.FormatInt(b, 10)
	}
	return plural(len(blocks), "session") + ": " + strings.Join(ids, ", ")
}

// queryPage is Enter on a query: its figures over its life, per host and
// per segment, and its text.
type queryPage struct {
	basePage
	of   rowKey
	data *yagpcc.TotalQueryData
	err  error
}

func openQuery(m *topModel, key rowKey) (page, tea.Cmd) {
	p := &queryPage{of: key}
	return p, p.refresh(m)
}

func (p *queryPage) title() string { return fmt.Sprintf("query of session %d", p.of.sessID) }

func (p *queryPage) refresh(m *topModel) tea.Cmd {
	r, ok := m.queryOf(p.of)
	if !ok {
		return nil
	}
	return m.fetchQuery(r.apiKey())
}

func (p *queryPage) receive(msg tea.Msg) (page, tea.Cmd) {
	if q, ok := msg.(queryMsg); ok && sessionOf(q.asked) == (sessionKey{p.of.tmID, p.of.sessID}) {
		next := *p
		next.data, next.err = q.data, q.err
		return &next, nil
	}
	return nil, nil
}

func (p *queryPage) target(m *topModel) (actionTarget, bool) { return queryTarget(m, p.of) }

func (p *queryPage) help(*topModel) []item {
	return []item{{0, "esc back"}, {0, "k cancel"}, {0, "K terminate"}, {0, "q quit"}}
}

func (p *queryPage) impossible(m *topModel, c capacity) bool {
	r, ok := m.queryOf(p.of)
	if ok && r.q.GetUsage() != nil && !possible(r.q.GetUsage().GetCpuCores(), c.cluster) {
		return true
	}
	return segmentsImpossible(p.data, c)
}

func (p *queryPage) lines(m *topModel, width int) []string {
	r, ok := m.queryOf(p.of)
	if !ok {
		return paragraph(fmt.Sprintf("the query of session %d is not among the cluster top's queries any more.", p.of.sessID), width)
	}
	capa := capacityOf(m.top)
	q := r.q
	who := absentText
	if r.who.User != "" {
		who = r.who.User + ", " + r.who.Database
	}
	state := "running"
	switch {
	case q.GetCompleted():
		state = "completed"
	case !r.running():
		state = "its session has ended"
	}
	if q.GetPartial() {
		state += " (partial: a host did not answer while it ran)"
	}
	cpu := absentText
	if u := q.GetUsage(); u != nil {
		cpu = cpuPercent(u.GetCpuCores(), capa.cluster) + " on average"
	}
	ccnt := absentText
	if q.CommandCount != nil {
		ccnt = strconv.FormatInt(q.GetCommandCount(), 10)
	}
	out := []string{
		field(fmt.Sprintf("session %d", q.GetSessId()), "command "+ccnt+"  "+state, width),
		field("user, database", who, width),
		field("started", timeAgo(timestamppb.New(time.Unix(0, q.GetStartUnixNano())), m.at), width),
		field("duration", durationText(q.GetDurationSeconds()), width),
		field("CPU", secondsText(q.GetCpuSeconds())+"  "+cpu, width),
		field("storage read / write", bytesText(float64(q.GetReadBytes()))+" / "+bytesText(float64(q.GetWriteBytes())), width),
		field("CPU skew", skewText(q.GetCpuSkew(), q.CpuHottestSegment)+" (most / average "+strconv.FormatFloat(q.GetCpuMaxOverAvg(), 'f', 2, 64)+")", width),
		field("I/O skew", skewText(q.GetIoSkew(), q.IoHottestSegment), width),
		field("spill now / most", bytesText(float64(q.GetSpillBytes()))+" / "+bytesText(float64(q.GetSpillBytesMax())), width),
		"",
	}
	out = append(out, hostLines("per host, averaged over its duration", q.GetHosts(), false, capa, width, "none")...)
	out = append(out, "")
	out = append(out, segmentLines("per segment, since it started", p.data, p.err, capa, width)...)
	out = append(out, "", "query")
	text := q.GetQuery()
	if full := p.data.GetQueryStat().GetQueryInfo().GetQueryText(); len(full) > len(text) {
		text = full
	}
	return append(out, paragraph(valueOr(oneLine(text)), width)...)
}

// finishedPage is Enter on a history row: a finished query or an ended
// session as its event tells it, whole. Its figures never change, so it
// asks nothing.
type finishedPage struct {
	basePage
	row historyRow
}

func (p *finishedPage) title() string {
	if p.row.query != nil {
		return fmt.Sprintf("finished query of session %d", p.row.query.GetSessId())
	}
	return fmt.Sprintf("ended session %d", p.row.session.GetSessId())
}

func (p *finishedPage) help(*topModel) []item { return []item{{0, "esc back"}, {0, "q quit"}} }

func (p *finishedPage) lines(m *topModel, width int) []string {
	if q := p.row.query; q != nil {
		return finishedQueryLines(q, m.firings, width)
	}
	return endedSessionLines(p.row.session, width)
}

// endingText is how a query or session ended, and whether a host did not
// answer for all of it. The server's SQLSTATE and message, and the host
// and time a partial figure lacks, join it here when the API carries them.
func endingText(r historyRow) string {
	text := statusText(r.status())
	for _, s := range historyStatuses {
		if s.api == r.status() {
			text += ": " + s.what
		}
	}
	sqlstate, message, reason := r.failure()
	if sqlstate != "" {
		text += "  SQLSTATE " + sqlstate
	}
	if reason != "" {
		text += "  (" + strings.ReplaceAll(reason, "_", " ") + ")"
	}
	if message != "" {
		text += "  " + message
	}
	if r.partial() {
		text += "  (" + partialText(r) + ")"
	}
	return text
}

// partialText says why a row is partial where the API tells it (the
// reasons, the silent hosts, since when), else what partial means.
func partialText(r historyRow) string {
	reason, hosts, since := r.partialCause()
	if reason == "" {
		return partialHelp
	}
	text := "partial: " + strings.ReplaceAll(reason, "_", " ")
	if hosts != "" {
		text += ": " + hosts
	}
	if since != nil {
		text += " since " + whenText(since)
	}
	return text
}

// whenText is a moment in full, date and time.
func whenText(t *timestamppb.Timestamp) string {
	if t == nil {
		return absentText
	}
	return t.AsTime().Local().Format("2006-01-02 15:04:05")
}

// usedFigures are the figures a finished query and an ended session
// share: what their processes used, summed.
type usedFigures interface {
	GetCpuTimeUser() float64
	GetCpuTimeSystem() float64
	GetDiskIoRead() int64
	GetDiskIoWrite() int64
	GetIoCharsRead() int64
	GetIoCharsWrite() int64
	GetIoSyscallsRead() int64
	GetIoSyscallsWrite() int64
	GetPagingFaultsMinor() int64
	GetPagingFaultsMajor() int64
	GetContextSwitchesVoluntary() int64
	GetContextSwitchesInvoluntary() int64
	GetLockWaitTime() float64
}

// usedLines are the figures of usedFigures, the CPU and storage I/O
// first; each optional one reads "-" where the event lacks it (the
// presence read through has).
func usedLines(u usedFigures, has func(name string) bool, width int) (first, more []string) {
	pair := func(a, b string, fa, fb string) string {
		if !has(a) && !has(b) {
			return absentText
		}
		return fa + " / " + fb
	}
	count := func(v int64) string { return strconv.FormatInt(v, 10) }
	bytes := func(v int64) string { return bytesText(float64(v)) }
	first = []string{
		field("CPU user / system", pair("cpu_time_user", "cpu_time_system", secondsText(u.GetCpuTimeUser()), secondsText(u.GetCpuTimeSystem())), width),
		field("storage read / write", pair("disk_io_read", "disk_io_write", bytes(u.GetDiskIoRead()), bytes(u.GetDiskIoWrite())), width),
	}
	more = []string{
		field("chars read / written", pair("io_chars_read", "io_chars_write", bytes(u.GetIoCharsRead()), bytes(u.GetIoCharsWrite())), width),
		field("read / write calls", pair("io_syscalls_read", "io_syscalls_write", count(u.GetIoSyscallsRead()), count(u.GetIoSyscallsWrite())), width),
		field("faults minor / major", pair("paging_faults_minor", "paging_faults_major", count(u.GetPagingFaultsMinor()), count(u.GetPagingFaultsMajor())), width),
		field("switches vol / invol", pair("context_switches_voluntary", "context_switches_involuntary",
			count(u.GetContextSwitchesVoluntary()), count(u.GetContextSwitchesInvoluntary())), width),
	}
	return first, more
}

// present tells the message's set fields by name: an optional figure the
// event lacks is unset.
func present(m interface {
	ProtoReflect() protoreflect.Message
}) func(string) bool {
	r := m.ProtoReflect()
	return func(name string) bool {
		fd := r.Descriptor().Fields().ByName(protoreflect.Name(name))
		return fd != nil && r.Has(fd)
	}
}

// waitsText is what a query's or session's processes waited for: a CPU,
// block I/O, memory (swap-in, reclaim, thrashing, compaction).
func waitsText(runQueue, blockIO, swapin, freepages, thrashing, compact *float64) string {
	memory := absentText
	var total float64
	measured := false
	for _, w := range []*float64{swapin, freepages, thrashing, compact} {
		if w != nil {
			total, measured = total+*w, true
		}
	}
	if measured {
		memory = secondsText(total)
	}
	return "run queue " + waitText(runQueue) + "  block I/O " + waitText(blockIO) + "  memory " + memory
}

func lockWaitText(seconds float64, blocker *int64) string {
	text := secondsText(seconds)
	if blocker != nil {
		text += fmt.Sprintf(", blocked by session %d", *blocker)
	}
	return text
}

func spillText(bytes, files *int64) string {
	if bytes == nil {
		return absentText
	}
	text := bytesText(float64(*bytes))
	if files != nil {
		text += " in " + countText(*files, "file", "files")
	}
	return text
}

func finishedQueryLines(q *gpotelv1.FinishedQuery, firings []*gpotelv1.RuleAction, width int) []string {
	ccnt := strconv.FormatInt(q.GetCcnt(), 10)
	if q.GetCcnt() == 0 {
		ccnt = absentText
	}
	out := []string{
		field(fmt.Sprintf("session %d", q.GetSessId()), "command "+ccnt+"  tm_id "+strconv.FormatInt(q.GetTmId(), 10), width),
		field("user, database", q.GetUsername()+", "+q.GetDatabase(), width),
	}
	out = append(out, hanging2("how it ended", endingText(historyRow{query: q}), width)...)
	out = append(out, ruleLines(q, firings, width)...)
	out = append(out,
		field("started, ended", whenText(q.GetQueryStart())+"  "+whenText(q.GetQueryEnd()), width),
		field("duration", durationText(q.GetDuration()), width),
		field("CPU", optional(q.CpuTime, secondsText)+fmt.Sprintf("  (coordinator %s, segments %s)",
			secondsText(q.GetCpuTimeCoordinator()), secondsText(q.GetCpuTimeSegments())), width),
	)
	first, more := usedLines(q, present(q), width)
	out = append(out, first...)
	out = append(out,
		field("waits", waitsText(q.CpuRunDelay, q.DiskDelay, q.DelaySwapin, q.DelayFreepages, q.DelayThrashing, q.DelayCompact), width),
		field("spill, most at once", spillText(q.SpillSizeMax, q.SpillFilesMax), width),
		field("lock wait", lockWaitText(q.GetLockWaitTime(), q.LockBlockerSessId), width),
		"",
	)
	out = append(out, finishedSegmentLines(q.GetSegments(), width)...)
	out = append(out, "", "query")
	out = append(out, paragraph(valueOr(oneLine(q.GetQueryText())), width)...)
	out = append(out, "")
	out = append(out, more...)
	return append(out,
		field("CPU skew", skewOf(q.SkewCpuRatio, q.SkewCpuHottestSegment), width),
		field("I/O skew", skewOf(q.SkewDiskIoRatio, q.SkewDiskIoHottestSegment), width),
		field("vmem, most", optional(q.VmemPeak, bytesText), width),
		field("application", valueOr(q.GetApplication()), width),
		field("client", clientOf(q.GetClientAddress(), q.ClientPort), width),
		field("resource group", valueOr(q.GetResourceGroup()), width),
	)
}

// clientOf is a client's address and port; absent for a local client.
func clientOf(addr string, port *int64) string {
	if port != nil && addr != "" {
		addr += ":" + strconv.FormatInt(*port, 10)
	}
	return valueOr(addr)
}

// hanging2 is a field whose value may wrap, under its label's column.
func hanging2(label, value string, width int) []string {
	if width <= 0 {
		return []string{field(label, value, 0)}
	}
	const indent = 23
	lines := wrap(value, max(width-indent, 10))
	out := []string{field(label, lines[0], width)}
	for _, l := range lines[1:] {
		out = append(out, cutLine(strings.Repeat(" ", indent)+l, width))
	}
	return out
}

func skewOf(ratio *float64, hottest *int64) string {
	if ratio == nil {
		return absentText
	}
	text := shareText(*ratio)
	if hottest != nil {
		text += " @" + strconv.FormatInt(*hottest, 10)
	}
	return text
}

// millisecondsText is CPU seconds to the millisecond: a short query's
// segments differ below the hundredth.
func millisecondsText(seconds float64) string { return strconv.FormatFloat(seconds, 'f', 3, 64) + "s" }

// finishedSegmentLines are a finished query's figures per segment
// instance, the segments that did the most CPU and the most I/O marked.
func finishedSegmentLines(segs []*gpotelv1.SegmentUse, width int) []string {
	const title = "per segment instance (-1: the coordinator)"
	if len(segs) == 0 {
		return []string{title + ": none (the event has no per-segment figures)"}
	}
	hotCPU, hotIO := -1, -1
	for i, s := range segs {
		if s.GetSegment() < 0 {
			continue
		}
		if hotCPU < 0 || s.GetCpuSeconds() > segs[hotCPU].GetCpuSeconds() {
			hotCPU = i
		}
		if hotIO < 0 || s.GetReadBytes()+s.GetWriteBytes() > segs[hotIO].GetReadBytes()+segs[hotIO].GetWriteBytes() {
			hotIO = i
		}
	}
	format := "  %4s %-12s %8s %6s %6s  %s"
	out := []string{title, headerStyle.Render(cutLine(fmt.Sprintf(format, "SEG", "HOST", "CPU", "READ", "WRITE", ""), width))}
	for i, s := range segs {
		var marks []string
		if i == hotCPU && s.GetCpuSeconds() > 0 {
			marks = append(marks, "most CPU")
		}
		if i == hotIO && s.GetReadBytes()+s.GetWriteBytes() > 0 {
			marks = append(marks, "most I/O")
		}
		mark := ""
		if len(marks) > 0 {
			mark = "← " + strings.Join(marks, ", ")
		}
		out = append(out, cutLine(fmt.Sprintf(format, strconv.Itoa(int(s.GetSegment())), pad(s.GetHostname(), 12, false), millisecondsText(s.GetCpuSeconds()),
			bytesText(float64(s.GetReadBytes())), bytesText(float64(s.GetWriteBytes())), mark), width))
	}
	return out
}

func endedSessionLines(s *gpotelv1.EndedSession, width int) []string {
	out := []string{
		field(fmt.Sprintf("session %d", s.GetSessId()), "tm_id "+strconv.FormatInt(s.GetTmId(), 10), width),
		field("user, database", s.GetUsername()+", "+s.GetDatabase(), width),
	}
	out = append(out, hanging2("how it ended", endingText(historyRow{session: s}), width)...)
	out = append(out,
		field("started, ended", whenText(s.GetSessionStart())+"  "+whenText(s.GetSessionEnd()), width),
		field("duration", durationText(s.GetDuration()), width),
		field("queries", countText(s.GetQueries(), "query", "queries")+" seen", width),
		field("CPU", optional(s.CpuTime, secondsText), width),
	)
	first, more := usedLines(s, present(s), width)
	out = append(out, first...)
	out = append(out,
		field("waits", waitsText(s.CpuRunDelay, s.DiskDelay, s.DelaySwapin, s.DelayFreepages, s.DelayThrashing, s.DelayCompact), width),
		field("spill, most at once", spillText(s.SpillSizeMax, nil), width),
		field("lock wait", lockWaitText(s.GetLockWaitTime(), nil), width),
		field("resident memory, most", bytesText(float64(s.GetMemoryRssMax())), width),
		field("vmem, most", optional(s.VmemPeak, bytesText), width),
		"",
	)
	out = append(out, more...)
	return append(out,
		field("application", valueOr(s.GetApplication()), width),
		field("client", clientOf(s.GetClientAddress(), s.ClientPort), width),
		field("resource group", valueOr(s.GetResourceGroup()), width),
	)
}
