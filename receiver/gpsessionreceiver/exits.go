package gpsessionreceiver

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/gpotel/gpotel/internal/gpsemconv"
	"github.com/gpotel/gpotel/internal/kernelunits"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
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

// remember records this scrape's answered processes and, from their parent
// pids, each segment's postmaster; sightings too old to matter are dropped.
func (t *exitTracker) remember(results []hostResult, byPID []map[int64]*Backend) {
	t.tick++
	for i := range results {
		r := &results[i]
		for _, info := range r.infos {
			st := info.GetProcStat()
			b := byPID[i][info.GetPid()]
			if st == nil || b == nil {
				continue
			}
			t.sightings[hostPID{r.host, info.GetPid()}] = sighting{creation: r.consts.SinceBoot(st.GetStarttime()),
				session: b.SessionID, segment: b.SegmentID, backendType: b.BackendType, tick: t.tick}
			t.postmasters[hostPID{r.host, st.GetPpid()}] = b.SegmentID
		}
	}
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

// emitExits appends one exited resource per record (docs/pipeline.md): the
// process's final totals, with the identity an earlier scrape saw when it saw
// it. Call it after remember: a process this very scrape answered for (read
// as a zombie after its record was fetched) is already in the snapshot.
func (t *exitTracker) emitExits(e *snapshotEmitter, rms pmetric.ResourceMetricsSlice, ts pcommon.Timestamp, tmID int64,
	exits []hostExits) exitStats {
	var st exitStats
	var pp processPoints
	for _, h := range exits {
		st.missed += int(h.missed) // #nosec G115 -- a count of records
		if h.err != nil && len(h.records) == 0 {
			t.logger.Debug("exit records not read", zap.String("host", h.host), zap.Error(h.err))
		}
		for _, rec := range h.records {
			pid := rec.GetStats().GetPid()
			key := hostPID{h.host, pid}
			p := kernelunits.ConvertExit(rec, h.delayacct)
			b := Backend{PID: pid}
			attributed := false
			if s, ok := t.sightings[key]; ok && absDuration(s.creation.Sub(p.CreationTime)) <= startSlack {
				if s.tick == t.tick {
					st.live++
					continue
				}
				p.CreationTime = s.creation // the identity the processor already holds
				b.SegmentID, b.SessionID, b.BackendType = s.segment, s.session, s.backendType
				attributed = true
				delete(t.sightings, key)
			} else if seg, ok := t.postmasters[hostPID{h.host, rec.GetStats().GetPpid()}]; ok {
				b.SegmentID = seg
			} else {
				st.foreign++ // not a postmaster's child: a shell or tool of the database user
				continue
			}
			n := rms.Len()
			pp.collect(&p)
			e.procs.write(rms, &pp, &processIdentity{tmID: tmID, host: h.host, backend: &b,
				creationTime: p.CreationTime.UTC().Format(CreationTimeLayout)}, pcommon.NewTimestampFromTime(p.CreationTime), ts)
			if rms.Len() == n {
				continue // filtered out by resource_attributes include/exclude
			}
			attrs := rms.At(n).Resource().Attributes()
			attrs.PutStr(gpsemconv.AttrResourceKind, gpsemconv.KindExited)
			if attributed {
				st.attributed++
			} else {
				attrs.Remove(gpsemconv.AttrSessionID)
				attrs.Remove(gpsemconv.AttrProcessSystem)
				st.unattributed++
			}
		}
	}
	if st.missed > 0 {
		t.logger.Warn("exit records were lost on the agents before this scrape read them (agent buffer full or older than exit_max_age)",
			zap.Int("missed", st.missed))
	}
	return st
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
