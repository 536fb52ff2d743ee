// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// exitReader reads one host's exit records: its agent's gpotel.v1.TaskStats
// service over gRPC, or the local service in-process.
type exitReader interface {
	GetExitRecords(ctx context.Context, req *gpotelv1.GetExitRecordsRequest) (*gpotelv1.GetExitRecordsResponse, error)
}

type grpcExitReader struct{ client gpotelv1.TaskStatsClient }

func (r grpcExitReader) GetExitRecords(ctx context.Context, req *gpotelv1.GetExitRecordsRequest) (*gpotelv1.GetExitRecordsResponse, error) {
	return r.client.GetExitRecords(ctx, req)
}

// exitReader returns the host's exit-record reader on the same connection as
// its process reader.
func (d *agentDirectory) exitReader(ctx context.Context, host string) (exitReader, error) {
	if d.localHosts[host] && d.local != nil {
		return d.local, nil
	}
	conn, err := d.agents.Conn(ctx, host)
	if err != nil {
		return nil, err
	}
	return grpcExitReader{client: gpotelv1.NewTaskStatsClient(conn)}, nil
}

// maxExitPages bounds how many answers one host's records take per scrape;
// the rest come at the next one.
const maxExitPages = 20

// sightingTicks is how many scrapes a process is remembered after its last
// sighting, so that its exit record, however late, finds its session.
const sightingTicks = 10

type hostPID struct {
	host string
	pid  int64
}

// sighting is what a scrape learnt about one process: enough to attribute
// its exit record to its session.
type sighting struct {
	creation    time.Time
	session     int64
	segment     int64
	backendType string
	tick        uint64
	left        bool // gone while its host was carried (hostSightings.tickOf)
}

// hostSightings are one host's sightings, by pid.
type hostSightings struct {
	mu sync.Mutex
	m  map[int64]sighting
	// listed are the backends the catalog listed on this host that were
	// gone before the agent read them: their exit records name their
	// segments' postmasters.
	listed map[int64]listing
	// A host carried as a whole (its unchanged processes left out of the
	// answers, the same ones asked as the tick before) is not visited per
	// process: every sighting and listing of tick runFrom or later that
	// has not left counts as of tick runTo (0: none is carried).
	runFrom, runTo uint64
}

// tickOf is the last tick a sighting or listing of the host was seen at.
func (hs *hostSightings) tickOf(tick uint64, left bool) uint64 {
	if hs.runTo != 0 && !left && tick >= hs.runFrom {
		return hs.runTo
	}
	return tick
}

// settle ends the host's carried run: each sighting and listing takes its
// tick, to be visited one by one again.
func (hs *hostSightings) settle() {
	if hs.runTo == 0 {
		return
	}
	for pid, s := range hs.m {
		if tick := hs.tickOf(s.tick, s.left); tick != s.tick || s.left {
			s.tick, s.left = tick, false
			hs.m[pid] = s
		}
	}
	for pid, l := range hs.listed {
		if tick := hs.tickOf(l.tick, l.left); tick != l.tick || l.left {
			l.tick, l.left = tick, false
			hs.listed[pid] = l
		}
	}
	hs.runFrom, hs.runTo = 0, 0
}

// listing is a backend the catalog listed that no scrape read alive.
type listing struct {
	segment int64
	session int64
	at      time.Time // the scrape's: the backend was born before it
	tick    uint64
	left    bool // as sighting.left
}

// hostSightingsOf returns the host's sightings, made on first use.
func (t *exitTracker) hostSightingsOf(host string) *hostSightings {
	t.mu.Lock()
	defer t.mu.Unlock()
	hs := t.sightings[host]
	if hs == nil {
		hs = &hostSightings{m: map[int64]sighting{}, listed: map[int64]listing{}}
		t.sightings[host] = hs
	}
	return hs
}

// sighting is the last sighting of (host, pid), if a scrape still remembers it.
func (t *exitTracker) sighting(key hostPID) (sighting, bool) {
	hs := t.sightings[key.host]
	if hs == nil {
		return sighting{}, false
	}
	s, ok := hs.m[key.pid]
	s.tick = hs.tickOf(s.tick, s.left)
	return s, ok
}

type exitCursor struct{ epoch, cursor uint64 }

// exitOverruns is an agent's count of the times its kernel dropped exit
// notifications, which starts over with each epoch.
type exitOverruns struct{ epoch, count uint64 }

// hostExits is one host's exit records fetched in one scrape.
type hostExits struct {
	host      string
	records   []*gpotelv1.ExitRecord
	delayacct bool
	next      exitCursor
	missed    uint64
	// overruns is the agent's last count of kernel overruns, in its epoch
	// (zero: no answer).
	overruns exitOverruns
	err      error
	// parents are the host's postmasters read right after the records, so
	// a child whose record was fetched is already in their cutime/cstime.
	parents    []parentReading
	parentsErr error
	// parentsComplete: the agent answered for every postmaster asked, or
	// said that it vanished; only then is one missing from parents gone.
	parentsComplete bool
}

// parentReading is one postmaster's account of the children it reaped.
type parentReading struct {
	pid, segment        int64
	creation            time.Time
	childUser, childSys float64 // cutime, cstime in seconds
}

// exitTracker fetches exit records every scrape and attributes each to a
// session through the processes earlier scrapes saw (pid and start time);
// one no scrape saw goes to its parent postmaster's segment, unattributed.
// It is used by the serial scrape only.
type exitTracker struct {
	mu      sync.Mutex // answers of several hosts are remembered at once
	logger  *zap.Logger
	tick    uint64
	tickAt  time.Time // when the scrape began, after its discovery
	cursors map[string]exitCursor
	// overruns are each host's last count of kernel overruns.
	overruns map[string]exitOverruns
	// sightings are per host, so that the hosts' answers, remembered at
	// once, take only their own host's lock and map.
	sightings   map[string]*hostSightings
	postmasters map[hostPID]int64 // (host, postmaster pid) → its segment
	reaped      map[hostPID]*reapedAccount
}

// reapedAccount compares one postmaster's reaped children as its
// cutime/cstime tell them with their exit records. The kernel takes a
// record in do_exit before the task is torn down (exit_mm, closing files),
// and the parent's cutime/cstime get that teardown too; what the records
// miss (teardown, and records lost on the way) is the unrecorded CPU.
type reapedAccount struct {
	creation            time.Time
	tick                uint64  // of the first reading
	baseUser, baseSys   float64 // cutime, cstime at the first reading
	recUser, recSys     float64 // exit records of its children since then
	unrecUser, unrecSys float64 // reported so far: never goes down
}

func newExitTracker(logger *zap.Logger) *exitTracker {
	return &exitTracker{logger: logger, cursors: map[string]exitCursor{}, overruns: map[string]exitOverruns{}, sightings: map[string]*hostSightings{},
		postmasters: map[hostPID]int64{}, reaped: map[hostPID]*reapedAccount{}}
}

// fetch asks every host for the records after its cursor. It does not move
// the cursors: commit does, once the records are emitted.
func (t *exitTracker) fetch(ctx context.Context, cfg *Config, dir *agentDirectory, hosts []string) []hostExits {
	out := make([]hostExits, len(hosts))
	parents := t.postmastersByHost()
	var g errgroup.Group
	g.SetLimit(cfg.MaxParallelHosts)
	for i, host := range hosts {
		cur := t.cursors[host]
		g.Go(func() error {
			out[i] = fetchHostExits(ctx, cfg, dir, host, cur)
			if out[i].err == nil && len(parents[host]) > 0 {
				out[i].parents, out[i].parentsComplete, out[i].parentsErr = readParents(ctx, cfg, dir, host, parents[host])
			}
			return nil
		})
	}
	_ = g.Wait()
	return out
}

// markSilentHosts keeps a host that ran out its host_timeout on its exit
// records or its postmasters from being asked for its processes in the same
// scrape: a hung agent costs a tick one host_timeout, not one per call.
func markSilentHosts(queries []hostQuery, exits []hostExits) {
	silent := map[string]error{}
	for _, x := range exits {
		for _, err := range []error{x.err, x.parentsErr} {
			if timedOut(err) {
				silent[x.host] = err
			}
		}
	}
	for i := range queries {
		queries[i].silent = silent[queries[i].host]
	}
}

// timedOut tells a call that ran out its deadline from one that failed fast.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
}

// postmastersByHost lists the postmasters earlier scrapes learnt, per host.
func (t *exitTracker) postmastersByHost() map[string][]*yagpcc.SegmentProcess {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string][]*yagpcc.SegmentProcess{}
	for k, seg := range t.postmasters {
		out[k.host] = append(out[k.host], &yagpcc.SegmentProcess{GpSegmentId: seg, Pid: k.pid})
	}
	return out
}

// readParents reads the postmasters' stat through the host's agent, as any
// process: cutime and cstime are what their reaped children used.
func readParents(
	ctx context.Context, cfg *Config, dir *agentDirectory, host string, pms []*yagpcc.SegmentProcess,
) (readings []parentReading, complete bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.HostTimeout)
	defer cancel()
	r, err := dir.reader(ctx, host)
	if err != nil {
		return nil, false, err
	}
	resp, err := r.GetPidProcStat(ctx, &yagpcc.GetPidProcInfoReq{SegmentProcess: pms})
	if err != nil {
		return nil, false, fmt.Errorf("host %s: reading the postmasters: %w", host, err)
	}
	consts, err := kernelunits.HostFromProto(resp.GetHost())
	if err != nil {
		return nil, false, fmt.Errorf("host %s: postmasters' answer: %w", host, err)
	}
	out := make([]parentReading, 0, len(pms))
	for _, info := range resp.GetPidProcData() {
		st := info.GetProcStat()
		if st == nil {
			continue // vanished (a restart): a new postmaster is learnt from its children
		}
		out = append(out, parentReading{pid: info.GetPid(), segment: info.GetGpSegmentId(), creation: consts.SinceBoot(st.GetStarttime()),
			childUser: consts.Seconds(st.GetCutime()), childSys: consts.Seconds(st.GetCstime())})
	}
	// A postmaster left out because it could not be read (failed, denied)
	// is not gone: its account must outlive the answer.
	sum := resp.GetSummary()
	return out, sum.GetFailed() == 0 && sum.GetDenied() == 0, nil
}

func fetchHostExits(ctx context.Context, cfg *Config, dir *agentDirectory, host string, cur exitCursor) hostExits {
	res := hostExits{host: host, next: cur}
	ctx, cancel := context.WithTimeout(ctx, cfg.HostTimeout)
	defer cancel()
	r, err := dir.exitReader(ctx, host)
	if err != nil {
		res.err = err
		return res
	}
	for range maxExitPages {
		resp, err := r.GetExitRecords(ctx, &gpotelv1.GetExitRecordsRequest{Epoch: res.next.epoch, Cursor: res.next.cursor})
		if err != nil {
			res.err = fmt.Errorf("host %s: GetExitRecords: %w", host, err)
			return res
		}
		res.records = append(res.records, resp.GetRecords()...)
		res.delayacct = resp.GetAccounting().GetDelayacctEnabled()
		res.missed += resp.GetMissed()
		res.overruns = exitOverruns{epoch: resp.GetEpoch(), count: resp.GetKernelOverruns()}
		res.next = exitCursor{epoch: resp.GetEpoch(), cursor: resp.GetNextCursor()}
		if !resp.GetMore() {
			break
		}
	}
	return res
}

// maxOverrunsPerScrape bounds what one host's answer adds, whatever count
// its agent sends.
const maxOverrunsPerScrape = 1 << 20

// newOverruns notes each host's count of kernel overruns and warns, once
// for all hosts, of those whose count grew since the last scrape; it returns
// how many overruns are new. A new epoch starts over, and so does a count
// that went down within one (a reset).
func (t *exitTracker) newOverruns(exits []hostExits) int64 {
	var grown []zap.Field
	total := int64(0)
	for _, h := range exits {
		now := h.overruns
		if now.epoch == 0 {
			continue // no answer: the count is as it was
		}
		last := t.overruns[h.host]
		t.overruns[h.host] = now
		added := now.count
		if last.epoch == now.epoch && last.count <= now.count {
			added = now.count - last.count
		}
		if added == 0 {
			continue
		}
		added = min(added, maxOverrunsPerScrape)
		grown = append(grown, zap.Uint64(h.host, added))
		total += int64(added) // #nosec G115 -- bounded above
	}
	if len(grown) > 0 {
		t.logger.Warn("the kernel dropped exit records on these hosts (overruns since the last scrape, by host): sessions whose "+
			"coordinator backend exited then end unknown and their processes' last figures are missing "+
			"(raise the agent's taskstats.listener_read_buffer_kib)", zap.Dict("overruns_by_host", grown...))
	}
	return total
}

// beginTick starts a scrape's sightings; rememberAnswer adds one agent
// answer's processes (answers of several hosts arrive at once); endTick
// forgets sightings too old to matter.
func (t *exitTracker) beginTick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tick++
	t.tickAt = time.Now()
}

// rememberUnchanged records that a delta answer left these processes
// out as unchanged: each is the process last sighted under its pid. Call
// it before rememberAnswer of the same answer.
func (t *exitTracker) rememberUnchanged(host string, unchanged []*Backend) {
	if len(unchanged) == 0 {
		return
	}
	hs := t.hostSightingsOf(host)
	t.mu.Lock()
	tick := t.tick
	t.mu.Unlock()
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.settle()
	for _, b := range unchanged {
		if s, ok := hs.m[b.PID]; ok {
			s.tick = tick
			hs.m[b.PID] = s
		}
	}
}

// rememberCarried records an answer of a host whose unchanged processes
// are carried as a whole (sparse.Outgoing.Carries: the same processes asked
// as at the tick before, which the host answered): every process the host
// was last seen with is seen this tick too, except the asked ones gone
// (or answered without a stat), which the catalog still lists. Only they
// are visited. Call it before rememberAnswer of the same answer.
func (t *exitTracker) rememberCarried(host string, gone []int64, asked map[int64]*Backend) {
	hs := t.hostSightingsOf(host)
	t.mu.Lock()
	tick, at := t.tick, t.tickAt
	t.mu.Unlock()
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.runTo != tick && hs.runTo != tick-1 {
		hs.settle()
	}
	if hs.runTo == 0 {
		hs.runFrom = tick - 1
	}
	for _, pid := range gone {
		if s, ok := hs.m[pid]; ok {
			s.tick, s.left = min(hs.tickOf(s.tick, s.left), tick-1), true
			hs.m[pid] = s
		}
		if b := asked[pid]; b != nil {
			hs.listed[pid] = listing{segment: b.SegmentID, session: b.SessionID, at: at, tick: tick, left: true}
		}
	}
	hs.runTo = tick
}

// rememberAnswer records the answered processes and, from their parent
// pids, each segment's postmaster; and the asked ones the agent no longer
// found, whose exit records will name their postmasters.
func (t *exitTracker) rememberAnswer(host string, consts kernelunits.Host, infos []*yagpcc.GpPidProcInfo, asked map[int64]*Backend) {
	hs := t.hostSightingsOf(host)
	t.mu.Lock()
	tick, at := t.tick, t.tickAt
	t.mu.Unlock()
	type postmasterOf struct {
		key     hostPID
		segment int64
	}
	var parents []postmasterOf
	var parent hostPID
	var parentSegment int64
	hs.mu.Lock()
	carried := hs.runTo == tick
	if !carried {
		hs.settle()
	}
	for _, info := range infos {
		st := info.GetProcStat()
		b := asked[info.GetPid()]
		if st == nil || b == nil {
			continue
		}
		hs.m[info.GetPid()] = sighting{creation: consts.SinceBoot(st.GetStarttime()),
			session: b.SessionID, segment: b.SegmentID, backendType: b.BackendType, tick: tick}
		// The processes of a segment come one after another with the same
		// postmaster: write it once per run, not once per process.
		if p := (hostPID{host, st.GetPpid()}); p != parent || b.SegmentID != parentSegment {
			parent, parentSegment = p, b.SegmentID
			parents = append(parents, postmasterOf{p, parentSegment})
		}
	}
	if len(infos) < len(asked) && !carried { // rememberCarried listed a carried host's
		// A segment whose backends all live for milliseconds has none that
		// a scrape reads alive; without this its postmaster stays unknown.
		for pid, b := range asked {
			if s, ok := hs.m[pid]; !ok || hs.tickOf(s.tick, s.left) != tick {
				hs.listed[pid] = listing{segment: b.SegmentID, session: b.SessionID, at: at, tick: tick}
			}
		}
	}
	hs.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range parents {
		t.postmasters[p.key] = p.segment
	}
}

func (t *exitTracker) endTick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for host, hs := range t.sightings {
		for pid, s := range hs.m {
			if t.tick-hs.tickOf(s.tick, s.left) > sightingTicks {
				delete(hs.m, pid)
			}
		}
		for pid, l := range hs.listed {
			if t.tick-hs.tickOf(l.tick, l.left) > sightingTicks {
				delete(hs.listed, pid)
			}
		}
		if len(hs.m) == 0 && len(hs.listed) == 0 {
			delete(t.sightings, host)
		}
	}
}

// commit moves the cursors past the records fetched; a host that failed
// keeps its cursor, so its records come at the next scrape.
func (t *exitTracker) commit(exits []hostExits) {
	for _, h := range exits {
		if h.err == nil || len(h.records) > 0 {
			t.cursors[h.host] = h.next
		}
	}
}

// startSlack is how far an exit record's start time (the agent's receive
// time minus the elapsed time) may be from the creation time a scrape saw
// for the two to be one process, beyond btimeCut.
const startSlack = time.Second

// btimeCut: a scrape's creation time is /proc's start ticks after btime,
// which the kernel writes in whole seconds, cut, so it is early by up to a
// second (a record's start, late by the receive lag, crossed a symmetric
// 1 s bound for 1 % of make run's short sessions, which then ended unknown).
const btimeCut = time.Second

// sameStart tells a record's start and a scrape's creation time of one process.
func sameStart(creation, recordStart time.Time) bool {
	d := recordStart.Sub(creation)
	return d >= -startSlack && d <= btimeCut+startSlack
}

// kernelClockCut bounds how far a record's begin second (the kernel's
// ac_btime, taken at exit: its real clock's second less the whole seconds
// elapsed) lies from the true start, either way.
const kernelClockCut = time.Second

// exitTimes are a record's start and exit. The agent takes them from the
// moment it heard the exit, late by however long its listener waited for a
// CPU; the kernel's begin second bounds both from above (a start before
// begin+1 s, an exit before that plus the elapsed time), so a busy agent
// does not make its records look born after the processes a scrape read.
func exitTimes(rec *gpotelv1.ExitRecord) (start, exit time.Time) {
	start, exit = time.Unix(0, rec.GetStartTimeUnixNano()), time.Unix(0, rec.GetExitTimeUnixNano())
	begin, elapsedUs := rec.GetStats().GetBeginTimeUnix(), rec.GetStats().GetElapsedUs()
	if begin == 0 || begin > maxBelievable || elapsedUs > maxBelievable {
		return start, exit // an old kernel's record, or a broken agent's
	}
	latestStart := time.Unix(int64(begin), 0).Add(kernelClockCut)
	start = minTime(start, latestStart)
	exit = minTime(exit, latestStart.Add(time.Duration(elapsedUs)*time.Microsecond))
	return start, exit
}

// maxBelievable bounds a record's begin second and elapsed microseconds (35
// years of these), so that a broken agent's values overflow no duration.
const maxBelievable = 1 << 50

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// exitStats counts what became of the exit records of one scrape.
type exitStats struct {
	attributed, unattributed, live, foreign, missed int
	// headMismatch is, for the first record of a pid a scrape saw as a
	// session's coordinator backend that was born at another time (a reused
	// pid, or a clock the bounds do not cover), how far its start was from
	// that sighting's creation: how that session ended stays unknown.
	headMismatch time.Duration
	// endings are the exits of the sessions' coordinator backends: how
	// each ended (docs/pipeline.md, endings resources).
	endings []snapshot.Ending
}

// exitEnding is how the exit record of a session's coordinator process
// says it ended: the kernel's ac_exitcode is the wait status (exit(n)'s n
// in bits 8-15, or the killing signal in bits 0-6).
func exitEnding(rec *gpotelv1.ExitRecord, session int64) snapshot.Ending {
	code := int64(rec.GetStats().GetExitCode())
	_, exit := exitTimes(rec)
	e := snapshot.Ending{Session: session, PID: rec.GetStats().GetPid(), Time: exit.UnixNano(), Exited: true}
	if sig := code & 0x7f; sig != 0 {
		e.Signal = sig
	} else {
		e.ExitCode = code >> 8 & 0xff
	}
	return e
}

// emitExits appends the exited resources of every host (docs/pipeline.md):
// the processes' final totals in the shape of process resources, per host
// and session, with the identity an earlier scrape saw; the unattributed
// ones of a host in one resource without a session. Call it after the
// scrape's answers were remembered: a process this very scrape answered for
// (read as a zombie after its record was fetched) is already in the snapshot.
func (t *exitTracker) emitExits(enc *snapshot.ProcessEncoder, rms pmetric.ResourceMetricsSlice, ts pcommon.Timestamp, tmID int64,
	exits []hostExits) exitStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	var st exitStats
	var order []int32
	for _, h := range exits {
		st.missed += int(h.missed) // #nosec G115 -- a count of records
		if h.err != nil && len(h.records) == 0 {
			t.logger.Debug("exit records not read", zap.String("host", h.host), zap.Error(h.err))
		}
		t.learnPostmasters(h)
		batch := snapshot.ProcessBatch{Time: ts, TmID: tmID, Host: h.host, Kind: pipeline.KindExited}
		for _, rec := range h.records {
			pid := rec.GetStats().GetPid()
			key := hostPID{h.host, pid}
			p := snapshot.ProcessFromExit(rec, h.delayacct)
			start, _ := exitTimes(rec)
			p.CreationTime = start.UTC()
			t.addToParent(hostPID{h.host, rec.GetStats().GetPpid()}, &p)
			e := snapshot.ProcessEntry{Session: snapshot.NoSession}
			if s, ok := t.sighting(key); ok && sameStart(s.creation, p.CreationTime) {
				if s.segment == -1 {
					// How the session ended, also of a backend this very scrape read as a zombie.
					st.endings = append(st.endings, exitEnding(rec, s.session))
				}
				if s.tick == t.tick {
					st.live++
					continue
				}
				p.CreationTime = s.creation // the identity the processor already holds
				e.Segment, e.Session, e.BackendType = s.segment, s.session, s.backendType
				delete(t.sightings[key.host].m, key.pid)
				st.attributed++
			} else if seg, ok := t.postmasters[hostPID{h.host, rec.GetStats().GetPpid()}]; ok {
				if s, ok := t.sighting(key); ok && s.segment == -1 && st.headMismatch == 0 {
					st.headMismatch = p.CreationTime.Sub(s.creation)
				}
				e.Segment = seg
				st.unattributed++
				if l, ok := t.listedBackend(key, rec); ok && l.segment == -1 {
					// A coordinator backend the catalog listed and no read found:
					// its figures are its segment's, how its session ended is known.
					st.endings = append(st.endings, exitEnding(rec, l.session))
				}
			} else {
				st.foreign++ // not a postmaster's child: a shell or tool of the database user
				continue
			}
			e.System = isSystemProcess(e.Session, e.BackendType)
			e.Process = p
			batch.Entries = append(batch.Entries, e)
		}
		_, order = enc.Append(rms, &batch, order)
		unrecorded := t.unrecorded(h)
		unrecorded.Time, unrecorded.TmID = ts, tmID
		_, order = enc.Append(rms, &unrecorded, order)
	}
	if st.missed > 0 {
		t.logger.Warn("exit records were lost on the agents before this scrape read them (agent buffer full or older than exit_max_age)",
			zap.Int("missed", st.missed))
	}
	return st
}

// listedBackend is the catalog's listing of the backend rec is of: one
// listed under its pid and born before that listing (not a reused pid).
func (t *exitTracker) listedBackend(key hostPID, rec *gpotelv1.ExitRecord) (listing, bool) {
	hs := t.sightings[key.host]
	if hs == nil {
		return listing{}, false
	}
	l, ok := hs.listed[key.pid]
	if start, _ := exitTimes(rec); !ok || start.After(l.at.Add(startSlack)) {
		return listing{}, false
	}
	return l, true
}

// learnPostmasters learns, from the records of backends the catalog listed
// on a segment and no scrape read alive, that their parents are that
// segment's postmasters. A record of a process born after the listing is
// of a reused pid, not of that backend.
func (t *exitTracker) learnPostmasters(h hostExits) {
	hs := t.sightings[h.host]
	if hs == nil || len(hs.listed) == 0 {
		return
	}
	for _, rec := range h.records {
		l, ok := t.listedBackend(hostPID{h.host, rec.GetStats().GetPid()}, rec)
		if !ok {
			continue
		}
		parent := hostPID{h.host, rec.GetStats().GetPpid()}
		if _, known := t.postmasters[parent]; !known {
			t.postmasters[parent] = l.segment
		}
	}
}

// addToParent counts an exit record against its parent's reaped account,
// if that account began before this scrape (its first reading already holds
// the children whose records this scrape fetched).
func (t *exitTracker) addToParent(parent hostPID, p *snapshot.Process) {
	if a := t.reaped[parent]; a != nil && a.tick < t.tick {
		a.recUser += p.Values[pipeline.CPUUser].Float
		a.recSys += p.Values[pipeline.CPUSystem].Float
	}
}

// unrecorded is the host's unrecorded batch: one entry per postmaster,
// what its reaped children used beyond their exit records since the
// receiver first read it, as a cumulative counter that never goes down (a
// record fetched a scrape before its parent's reap shows would otherwise
// make it dip).
func (t *exitTracker) unrecorded(h hostExits) snapshot.ProcessBatch {
	if h.parentsErr != nil {
		t.logger.Debug("postmasters not read", zap.String("host", h.host), zap.Error(h.parentsErr))
	}
	batch := snapshot.ProcessBatch{Host: h.host, Kind: pipeline.KindUnrecorded}
	read := make(map[int64]bool, len(h.parents))
	for _, r := range h.parents {
		key := hostPID{h.host, r.pid}
		read[r.pid] = true
		acc := t.reaped[key]
		if acc == nil || absDuration(acc.creation.Sub(r.creation)) > startSlack {
			t.reaped[key] = &reapedAccount{creation: r.creation, tick: t.tick, baseUser: r.childUser, baseSys: r.childSys}
			continue
		}
		acc.unrecUser = max(acc.unrecUser, r.childUser-acc.baseUser-acc.recUser)
		acc.unrecSys = max(acc.unrecSys, r.childSys-acc.baseSys-acc.recSys)
		batch.Entries = append(batch.Entries, unrecordedEntry(r.pid, r.segment, acc))
	}
	complete := h.err == nil && h.parentsErr == nil && h.parentsComplete
	for k, seg := range t.postmasters {
		acc := t.reaped[k]
		if k.host != h.host || read[k.pid] || acc == nil {
			continue
		}
		if complete {
			// A postmaster the agent no longer has (restarted, or the host
			// moved): forget it; a live one is learnt again from its children.
			delete(t.postmasters, k)
			delete(t.reaped, k)
			continue
		}
		// Not read this scrape (the agent was slow or failed): the counter
		// keeps its last value, and the account goes on at the next reading.
		batch.Entries = append(batch.Entries, unrecordedEntry(k.pid, seg, acc))
	}
	return batch
}

// unrecordedEntry is one postmaster's unrecorded CPU so far.
func unrecordedEntry(pid, segment int64, acc *reapedAccount) snapshot.ProcessEntry {
	e := snapshot.ProcessEntry{Session: snapshot.NoSession, Segment: segment, System: true}
	e.Process = snapshot.Process{PID: pid, CreationTime: acc.creation, HasStat: true}
	e.Process.Set(pipeline.CPUUser, acc.unrecUser, 0)
	e.Process.Set(pipeline.CPUSystem, acc.unrecSys, 0)
	return e
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
