package gpsessionreceiver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/gpotel/gpotel/internal/kernelunits"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent"
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
		svc, ok := d.local.(*segmentagent.Service)
		if !ok {
			return nil, fmt.Errorf("local reader of %s keeps no exit records", host)
		}
		return svc.TaskStats(), nil
	}
	if _, err := d.reader(ctx, host); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	conn, ok := d.conns[host]
	if !ok {
		return nil, fmt.Errorf("host %s has no agent connection to read exit records on", host)
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
}

type exitCursor struct{ epoch, cursor uint64 }

// hostExits is one host's exit records fetched in one scrape.
type hostExits struct {
	host      string
	records   []*gpotelv1.ExitRecord
	delayacct bool
	next      exitCursor
	missed    uint64
	err       error
}

// exitTracker fetches exit records every scrape and attributes each to a
// session through the processes earlier scrapes saw (pid and start time);
// one no scrape saw goes to its parent postmaster's segment, unattributed.
// It is used by the serial scrape only.
type exitTracker struct {
	mu          sync.Mutex // answers of several hosts are remembered at once
	logger      *zap.Logger
	tick        uint64
	cursors     map[string]exitCursor
	sightings   map[hostPID]sighting
	postmasters map[hostPID]int64 // (host, postmaster pid) → its segment
}

func newExitTracker(logger *zap.Logger) *exitTracker {
	return &exitTracker{logger: logger, cursors: map[string]exitCursor{}, sightings: map[hostPID]sighting{}, postmasters: map[hostPID]int64{}}
}

// fetch asks every host for the records after its cursor. It does not move
// the cursors: commit does, once the records are emitted.
func (t *exitTracker) fetch(ctx context.Context, cfg *Config, dir *agentDirectory, hosts []string) []hostExits {
	out := make([]hostExits, len(hosts))
	var g errgroup.Group
	g.SetLimit(cfg.MaxParallelHosts)
	for i, host := range hosts {
		cur := t.cursors[host]
		g.Go(func() error {
			out[i] = fetchHostExits(ctx, cfg, dir, host, cur)
			return nil
		})
	}
	_ = g.Wait()
	return out
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
		res.next = exitCursor{epoch: resp.GetEpoch(), cursor: resp.GetNextCursor()}
		if !resp.GetMore() {
			break
		}
	}
	return res
}

// beginTick starts a scrape's sightings; rememberAnswer adds one agent
// answer's processes (answers of several hosts arrive at once); endTick
// forgets sightings too old to matter.
func (t *exitTracker) beginTick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tick++
}

// rememberAnswer records the answered processes and, from their parent
// pids, each segment's postmaster.
func (t *exitTracker) rememberAnswer(host string, consts kernelunits.Host, infos []*yagpcc.GpPidProcInfo, asked map[int64]*Backend) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, info := range infos {
		st := info.GetProcStat()
		b := asked[info.GetPid()]
		if st == nil || b == nil {
			continue
		}
		t.sightings[hostPID{host, info.GetPid()}] = sighting{creation: consts.SinceBoot(st.GetStarttime()),
			session: b.SessionID, segment: b.SegmentID, backendType: b.BackendType, tick: t.tick}
		t.postmasters[hostPID{host, st.GetPpid()}] = b.SegmentID
	}
}

func (t *exitTracker) endTick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, s := range t.sightings {
		if t.tick-s.tick > sightingTicks {
			delete(t.sightings, k)
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
// for the two to be one process.
const startSlack = time.Second

// exitStats counts what became of the exit records of one scrape.
type exitStats struct {
	attributed, unattributed, live, foreign, missed int
}

// emitExits appends the exited resources of every host (docs/pipeline.md):
// the processes' final totals in the shape of process resources, per host
// and session, with the identity an earlier scrape saw; the unattributed
// ones of a host in one resource without a session. Call it after the
// scrape's answers were remembered: a process this very scrape answered for
// (read as a zombie after its record was fetched) is already in the snapshot.
func (t *exitTracker) emitExits(w *processWriter, rms pmetric.ResourceMetricsSlice, ts pcommon.Timestamp, tmID int64,
	exits []hostExits) exitStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	var st exitStats
	var sc answerScratch
	for _, h := range exits {
		st.missed += int(h.missed) // #nosec G115 -- a count of records
		if h.err != nil && len(h.records) == 0 {
			t.logger.Debug("exit records not read", zap.String("host", h.host), zap.Error(h.err))
		}
		sc.procs = sc.procs[:0]
		for _, rec := range h.records {
			pid := rec.GetStats().GetPid()
			key := hostPID{h.host, pid}
			p := kernelunits.ConvertExit(rec, h.delayacct)
			b := &Backend{PID: pid, SessionID: unattributedSession}
			if s, ok := t.sightings[key]; ok && absDuration(s.creation.Sub(p.CreationTime)) <= startSlack {
				if s.tick == t.tick {
					st.live++
					continue
				}
				p.CreationTime = s.creation // the identity the processor already holds
				b.SegmentID, b.SessionID, b.BackendType = s.segment, s.session, s.backendType
				delete(t.sightings, key)
				st.attributed++
			} else if seg, ok := t.postmasters[hostPID{h.host, rec.GetStats().GetPpid()}]; ok {
				b.SegmentID = seg
				st.unattributed++
			} else {
				st.foreign++ // not a postmaster's child: a shell or tool of the database user
				continue
			}
			sc.procs = append(sc.procs, answeredProcess{backend: b, start: pcommon.NewTimestampFromTime(p.CreationTime)})
			ap := &sc.procs[len(sc.procs)-1]
			ap.points.collect(&p)
			for _, m := range w.order {
				if !w.shapes[m].attrOn {
					ap.points[m].merge(w.shapes[m].aggregation, w.shapes[m].double)
				}
			}
		}
		w.writeExited(rms, &sc, &answerWrite{time: ts, tmID: tmID, host: h.host})
	}
	if st.missed > 0 {
		t.logger.Warn("exit records were lost on the agents before this scrape read them (agent buffer full or older than exit_max_age)",
			zap.Int("missed", st.missed))
	}
	return st
}

// unattributedSession marks, inside the receiver, an exited process no
// scrape saw; its resource carries no gpotel.session.id (sess_id is never negative).
const unattributedSession = -1

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
