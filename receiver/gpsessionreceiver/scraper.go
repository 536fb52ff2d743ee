// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/internal/cpuslots"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/internal/pipeline/sparse"
	"github.com/gpotel/gpotel/receiver/gpsessionreceiver/internal/metadata"
)

// sessionScraper makes one snapshot per scrape: discovery on the
// coordinator, fan-out to the agents, emission per docs/pipeline.md.
type sessionScraper struct {
	cfg       *Config
	settings  receiver.Settings
	logger    *zap.Logger
	source    clusterSource
	newLocal  func() (localReader, error) // nil when no host is read in-process
	emitter   *snapshotEmitter
	next      consumer.Metrics // takes the process batches; the closing batch goes back to the scraper controller
	sender    *sparse.Sender   // sends to next
	telemetry *metadata.TelemetryBuilder
	exits     *exitTracker
	ends      *endsTracker
	greenplum *greenplumReader // nil: greenplum_figures off, or a source without them
	// emitSlots bounds how many agent answers are turned into pdata and
	// handed on at once: the pipeline's CPU slots, which the decoding of
	// the answers takes too (internal/agentconn).
	emitSlots cpuslots.Slots

	mu        sync.Mutex // scrapes are serial; this guards against Shutdown racing one
	dir       *agentDirectory
	local     localReader
	topology  *HostTopology
	topoTmID  int64
	retryAt   time.Time // no discovery before this, after a failure
	backoff   time.Duration
	lastError string
	// cgroupNotes holds the last logged reason per host ("" and "queues" for the catalog), so each is logged once.
	cgroupNotes reasonLog
	// deltaClient is how this run names itself to the agents; generations
	// is, per host, each batch's last answer that went on whole
	// (docs/pipeline.md, the agent leaves out what did not change).
	deltaClient string
	generations map[string][]uint64
}

// reasonLog remembers the last reason noted per key, so that one that
// persists is logged once, and again only after it changed.
type reasonLog map[string]string

// changed notes reason under key and tells whether it differs from the last.
func (l *reasonLog) changed(key, reason string) bool {
	if (*l)[key] == reason {
		return false
	}
	if *l == nil {
		*l = reasonLog{}
	}
	(*l)[key] = reason
	return true
}

func newSessionScraper(cfg *Config, settings receiver.Settings, source clusterSource, next consumer.Metrics) (*sessionScraper, error) {
	tb, err := metadata.NewTelemetryBuilder(settings.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	emitter, err := newSnapshotEmitter(cfg.MetricsBuilderConfig, settings, time.Now())
	if err != nil {
		return nil, err
	}
	var gp *greenplumReader
	if src, ok := source.(greenplumSource); ok && cfg.GreenplumFigures.Enabled {
		gp = newGreenplumReader(cfg.GreenplumFigures, src, settings.Logger, tb)
	}
	return &sessionScraper{
		greenplum:   gp,
		cfg:         cfg,
		settings:    settings,
		logger:      settings.Logger,
		source:      source,
		emitter:     emitter,
		next:        next,
		sender:      sparse.NewSender(emitter.procs, next, cfg.SendUnchangedProcesses),
		telemetry:   tb,
		exits:       newExitTracker(settings.Logger),
		ends:        newEndsTracker(settings.Logger),
		emitSlots:   cpuslots.Pipeline,
		deltaClient: deltaClientName(cfg),
		generations: map[string][]uint64{},
	}, nil
}

// deltaClientName is a name no other run of a collector uses: a restarted
// collector is a new client, which the agents answer in full. Empty (full
// answers only) when every process is sent every snapshot anyway.
func deltaClientName(cfg *Config) string {
	if cfg.SendUnchangedProcesses {
		return ""
	}
	return fmt.Sprintf("gpotel-%016x", rand.Uint64()) // #nosec G404 -- a name, not a secret
}

// askForDeltas names to each host the generations of its batches' last
// answers, when the Sender still keeps what it sent of the host: any
// doubt (the host did not answer, a batch was refused, a first scrape)
// names none, and the agent answers in full. A host asked about the same
// processes as at its last snapshot, with a generation for every batch,
// has its unchanged processes carried as a whole (sparse.Outgoing.Carries).
func (s *sessionScraper) askForDeltas(queries []hostQuery, outgoing *sparse.Outgoing) {
	if s.deltaClient == "" {
		return
	}
	for i := range queries {
		q := &queries[i]
		q.deltaClient = s.deltaClient
		if outgoing.Remembers(q.host) {
			q.since = s.generations[q.host]
		}
		l := outgoing.NewListing()
		for j := range q.procs {
			b := &q.procs[j]
			l.Add(b.PID, b.SessionID, b.SegmentID, b.BackendType, isSystemProcess(b.SessionID, b.BackendType))
		}
		q.carry = outgoing.Carries(q.host, l.Sum64(), namesEveryBatch(q.since, len(q.procs), s.cfg.MaxPidsPerCall))
	}
}

// namesEveryBatch tells whether since names a generation for each batch of
// a host's n processes: only then is every answer to leave out what did
// not change.
func namesEveryBatch(since []uint64, n, perCall int) bool {
	batches := (n + perCall - 1) / perCall
	if len(since) < batches {
		return false
	}
	return !slices.Contains(since[:batches], 0)
}

// keepGenerations keeps each host's generations for the next scrape,
// which names them only if the Sender still remembers the host.
func (s *sessionScraper) keepGenerations(results []hostResult) {
	clear(s.generations)
	for _, r := range results {
		s.generations[r.host] = r.generations
	}
}

// start prepares the agent connections. It never touches the database, so an
// unreachable coordinator does not keep the collector from starting.
func (s *sessionScraper) start(_ context.Context, host component.Host) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cfg.LocalHosts) > 0 && s.newLocal != nil {
		local, err := s.newLocal()
		if err != nil {
			return fmt.Errorf("in-process reader for local_hosts %v: %w", s.cfg.LocalHosts, err)
		}
		s.local = local
		if s.cfg.ExitRecords {
			if err := local.StartExitRecords(); err != nil {
				return fmt.Errorf("exit records for local_hosts: %w", err)
			}
		}
	}
	s.dir = newAgentDirectory(s.cfg, host, s.settings.TelemetrySettings, s.local)
	if s.greenplum != nil {
		s.greenplum.start()
	}
	return nil
}

func (s *sessionScraper) shutdown(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.dir != nil {
		errs = append(errs, s.dir.Close())
	}
	if s.local != nil {
		s.local.StopExitRecords()
	}
	if s.greenplum != nil {
		s.greenplum.shutdown()
	}
	if s.source != nil {
		s.source.Close()
	}
	s.telemetry.Shutdown()
	return errors.Join(errs...)
}

// scrape produces one snapshot. Hosts that did not answer make it a partial
// scrape; a database failure makes it an error and backs off.
func (s *sessionScraper) scrape(ctx context.Context) (pmetric.Metrics, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	began := time.Now()
	defer func() { s.telemetry.GpsessionScrapeDuration.Record(ctx, time.Since(began).Seconds()) }()

	if s.dir == nil {
		return pmetric.NewMetrics(), errors.New("gpsession: scrape before start")
	}
	if now := time.Now(); now.Before(s.retryAt) {
		return pmetric.NewMetrics(), fmt.Errorf("coordinator unavailable, next attempt in %v (last error: %s)",
			s.retryAt.Sub(now).Round(time.Millisecond), s.lastError)
	}
	state, err := s.source.Discover(ctx)
	if err != nil {
		s.noteDatabaseFailure(err)
		return pmetric.NewMetrics(), err
	}
	if s.backoff > 0 {
		s.logger.Info("coordinator reachable again", zap.Int64("tm_id", state.TmID))
	}
	s.backoff, s.retryAt, s.lastError = 0, time.Time{}, ""

	topo, err := s.currentTopology(ctx, state, false)
	if err != nil {
		return pmetric.NewMetrics(), err
	}
	queries, unknown := groupByHost(state.Backends, topo, s.cfg.IncludeSystemProcesses)
	if len(unknown) > 0 {
		// A segment we cannot place: the topology may have changed (failover, expansion).
		if fresh, err := s.currentTopology(ctx, state, true); err == nil {
			topo = fresh
			queries, unknown = groupByHost(state.Backends, topo, s.cfg.IncludeSystemProcesses)
		}
		if len(unknown) > 0 {
			s.logger.Debug("backends on segments without an up primary are not read", zap.Int64s("segments", unknown))
		}
	}

	// Before the reads too: the log is read through a time before the snapshot's.
	logged, logThrough := s.ends.fetch(ctx, s.cfg, s.dir, topo.CoordinatorHost(), state.Dialect)
	var exits []hostExits
	if s.cfg.ExitRecords {
		// Before the reads: a process whose record is fetched here is gone (or a zombie) when /proc is read.
		exits = s.exits.fetch(ctx, s.cfg, s.dir, topo.Hosts())
		s.exits.beginTick()
		markSilentHosts(queries, exits)
	}
	// The snapshot time comes first: process batches carry it as they go out.
	outgoing := s.sender.Snapshot(time.Now(), state.TmID)
	ts := outgoing.Timestamp()
	s.askForDeltas(queries, outgoing)
	results := fanOut(ctx, s.cfg, s.dir, queries, throughSlots(s.emitSlots, func(ctx context.Context, a *agentAnswer) (int, int, error) {
		if s.cfg.ExitRecords {
			if a.carry {
				s.exits.rememberCarried(a.host, a.gone, a.asked)
			} else {
				s.exits.rememberUnchanged(a.host, a.unchanged)
			}
			s.exits.rememberAnswer(a.host, a.consts, a.infos, a.asked)
		}
		sent, withoutStat, err := s.emitter.emitAnswer(ctx, outgoing,
			&answerWrite{host: a.host, consts: a.consts, infos: a.infos, byPID: a.asked, unchanged: a.unchanged,
				carry: a.carry, leftOut: a.leftOut, gone: a.gone})
		return sent.Written + sent.Unchanged, withoutStat, err
	}))
	snap := &scrapeResult{
		time:            outgoing.Time,
		dialect:         state.Dialect,
		tmID:            state.TmID,
		coordinatorHost: topo.CoordinatorHost(),
		sessions:        s.selectSessions(state),
		queries:         queries,
		results:         results,
		queryMaxLength:  s.cfg.QueryMaxLength,
		resourceGroups:  state.ResourceGroups,
		resourceQueues:  state.ResourceQueues,
		greenplum:       s.greenplum.current(ctx, outgoing.Time),
	}
	s.noteCgroupGaps(state, results)
	md, st := s.emitter.emitSnapshot(snap, outgoing)
	s.keepGenerations(results)
	endings := snapshot.HostEndings{Host: topo.CoordinatorHost(), LogReadThrough: logThrough, Endings: logged}
	if s.cfg.ExitRecords {
		s.noteOverruns(ctx, exits)
		xs := s.exits.emitExits(s.emitter.procs, md.ResourceMetrics(), ts, state.TmID, exits)
		endings.Endings = append(endings.Endings, xs.endings...)
		s.exits.commit(exits)
		s.exits.endTick()
		s.logger.Debug("exit records", zap.Int("attributed", xs.attributed), zap.Int("unattributed", xs.unattributed),
			zap.Int("read_live", xs.live), zap.Int("not_database", xs.foreign))
		if xs.headMismatch != 0 {
			s.logger.Info("an exit record of a pid read as a session's coordinator backend started at another time: "+
				"a reused pid, or the agent heard it too late (how that session ended is unknown)",
				zap.Duration("record_start_after_creation", xs.headMismatch))
		}
	}
	if len(endings.Endings) > 0 || endings.LogReadThrough != 0 {
		snapshot.AppendEndings(md.ResourceMetrics(), s.emitter.scope, state.TmID, &endings)
	}
	return md, s.account(ctx, results, st)
}

// noteOverruns counts the times the hosts' kernels dropped exit records
// since the last scrape (the tracker warns of them).
func (s *sessionScraper) noteOverruns(ctx context.Context, exits []hostExits) {
	if n := s.exits.newOverruns(exits); n > 0 {
		s.telemetry.GpsessionExitRecordOverruns.Add(ctx, n)
	}
}

// account feeds the self-metrics and turns failed hosts into a partial-scrape error.
func (s *sessionScraper) account(ctx context.Context, results []hostResult, st emitStats) error {
	var hostErrs []error
	var lost int
	for _, r := range results {
		s.telemetry.GpsessionPidsAsked.Add(ctx, int64(r.asked))
		s.telemetry.GpsessionPidsAnswered.Add(ctx, r.summary.answered)
		s.telemetry.GpsessionPidsVanished.Add(ctx, r.summary.vanished)
		s.telemetry.GpsessionPidsDenied.Add(ctx, r.summary.denied)
		s.telemetry.GpsessionPidsFailed.Add(ctx, r.summary.failed)
		if !r.up {
			hostErrs = append(hostErrs, r.err)
			lost += r.asked - r.written
		}
	}
	s.telemetry.GpsessionHostsOk.Add(ctx, int64(st.answeredHosts))
	s.telemetry.GpsessionHostsFailed.Add(ctx, int64(st.failedHosts))
	if st.withoutStat > 0 {
		s.logger.Debug("processes answered without /proc/<pid>/stat have no creation time and are left out", zap.Int("count", st.withoutStat))
	}
	if len(hostErrs) == 0 {
		return nil
	}
	return scrapererror.NewPartialScrapeError(fmt.Errorf("%d of %d hosts did not answer: %w", len(hostErrs), len(results), errors.Join(hostErrs...)), lost)
}

func (s *sessionScraper) noteDatabaseFailure(err error) {
	if s.backoff == 0 {
		s.backoff = s.cfg.ReconnectBackoff
		s.logger.Warn("coordinator discovery failed; the collector keeps running and retries", zap.Error(err))
	} else {
		s.backoff = min(2*s.backoff, s.cfg.ReconnectBackoffMax)
	}
	s.retryAt = time.Now().Add(s.backoff)
	s.lastError = err.Error()
}

// currentTopology returns the segment → host map, reading it again when
// forced, stale, or the coordinator restarted. A failed refresh keeps the old map.
func (s *sessionScraper) currentTopology(ctx context.Context, state *ClusterState, force bool) (*HostTopology, error) {
	now := time.Now()
	if !state.Dialect.Greenplum() {
		if s.topology == nil || s.topology.Stale(now, s.cfg.TopologyTTL) {
			name := s.cfg.CoordinatorHostName
			if name == "" {
				var err error
				if name, err = os.Hostname(); err != nil {
					return nil, fmt.Errorf("coordinator host name: set coordinator_host_name (os.Hostname: %w)", err)
				}
			}
			s.topology, s.topoTmID = singleHostTopology(name, now), state.TmID
		}
		return s.topology, nil
	}
	if !force && s.topology != nil && s.topoTmID == state.TmID && !s.topology.Stale(now, s.cfg.TopologyTTL) {
		return s.topology, nil
	}
	rows, err := s.source.SegmentConfiguration(ctx)
	if err == nil {
		var topo *HostTopology
		if topo, err = buildTopology(rows, now); err == nil {
			s.topology, s.topoTmID = topo, state.TmID
			s.dir.forget(toSet(topo.Hosts(), s.cfg.LocalHosts))
			return topo, nil
		}
	}
	if s.topology != nil {
		s.logger.Warn("segment topology refresh failed; using the previous one", zap.Error(err))
		return s.topology, nil
	}
	return nil, err
}

// selectSessions keeps the session heads, without system rows if so configured.
func (s *sessionScraper) selectSessions(state *ClusterState) []SessionRow {
	heads := sessionHeads(state.Dialect, state.Sessions)
	if s.cfg.IncludeSystemProcesses {
		return heads
	}
	out := heads[:0]
	for _, h := range heads {
		if !isSystemSession(h) {
			out = append(out, h)
		}
	}
	return out
}

// groupByHost routes each backend to its segment's host, one query per host
// in name order, each pid once per host, in discovery order. It returns the
// segment ids it could not place. It runs every tick over every backend
// (200k at the scale benchmark's size): a segment's host name is looked up
// and hashed once per tick, and a row costs an integer-keyed lookup only
// when its segment differs from the row before (rows of one segment tend
// to arrive together through the gather).
func groupByHost(backends []Backend, topo *HostTopology, includeSystem bool) ([]hostQuery, []int64) {
	const unplaced = -1
	routes := map[int64]int{} // segment → index into queries, or unplaced
	byHost := map[string]int{}
	var queries []hostQuery
	var seen []map[int64]struct{}
	perHost := len(backends) / max(1, len(topo.Hosts()))
	runSegment, runQuery := int64(0), unplaced
	inRun := false
	for _, b := range backends {
		if !includeSystem && isSystemProcess(b.SessionID, b.BackendType) {
			continue
		}
		if !inRun || b.SegmentID != runSegment {
			q, known := routes[b.SegmentID]
			if !known {
				q = unplaced
				if host, ok := topo.HostOf(b.SegmentID); ok {
					if q, ok = byHost[host]; !ok {
						q = len(queries)
						byHost[host] = q
						queries = append(queries, hostQuery{host: host, procs: make([]Backend, 0, perHost)})
						seen = append(seen, make(map[int64]struct{}, perHost))
					}
				}
				routes[b.SegmentID] = q
			}
			runSegment, runQuery, inRun = b.SegmentID, q, true
		}
		if runQuery == unplaced {
			continue
		}
		if _, dup := seen[runQuery][b.PID]; dup {
			continue
		}
		seen[runQuery][b.PID] = struct{}{}
		queries[runQuery].procs = append(queries[runQuery].procs, b)
	}
	sort.Slice(queries, func(i, j int) bool { return queries[i].host < queries[j].host })
	var segs []int64
	for seg, q := range routes {
		if q == unplaced {
			segs = append(segs, seg)
		}
	}
	slices.Sort(segs)
	return queries, segs
}

func toSet(lists ...[]string) map[string]bool {
	m := map[string]bool{}
	for _, l := range lists {
		for _, v := range l {
			m[v] = true
		}
	}
	return m
}
