// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshotdiffprocessor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/internal/clockstep"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/output"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/metadata"
	"github.com/gpotel/gpotel/processor/snapshotdiffprocessor/internal/querylife"
)

// snapshotDiff turns each snapshot into per-session window figures.
type snapshotDiff struct {
	emitProcesses bool
	// carryUnchanged sends, with the per-process output, the processes a
	// sparse host left out (unchanged_processes: carry).
	carryUnchanged bool
	// emitSessionHosts adds each session's per-host figures.
	emitSessionHosts bool
	out              *output.Encoder
	smoother         *smoother          // nil when smoothing is off
	queries          *querylife.Tracker // nil when query figures are off
	// queryText is a query's text as the output writes it; nil: none.
	queryText func(string) *string
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder

	mu    sync.Mutex // serialises snapshots: the store is one timeline
	store *store

	decoder *decoder
	// carriedEncoder writes the processes carried unchanged, so that the
	// per-process output stays dense (sparse batches).
	carriedEncoder *snapshot.ProcessEncoder
	next           consumer.Metrics // where sendCarried hands the carried processes
}

// newSnapshotDiff makes the processor of a collector that started at
// opened (unix ns): what began after it was seen from its start.
func newSnapshotDiff(cfg *Config, logger *zap.Logger, telemetry *metadata.TelemetryBuilder, opened int64) *snapshotDiff {
	p := &snapshotDiff{
		emitProcesses:    cfg.EmitProcessMetrics,
		emitSessionHosts: cfg.EmitSessionHostFigures,
		out:              output.NewEncoder(cfg.Windows, cfg.TimeConstants),
		logger:           logger,
		telemetry:        telemetry,
		store:            newStore(cfg.Windows, cfg.MaxStoredPoints),
		decoder:          newDecoder(cfg.Queries.Enabled),
	}
	if cfg.EmitProcessMetrics {
		p.carriedEncoder = snapshot.NewProcessEncoder(snapshot.Scope{Name: output.ProcessorScope}, snapshot.Switches{})
		// Carrying needs every process's last sighting whole; leaving the
		// unchanged out needs none of it.
		p.carryUnchanged = cfg.UnchangedProcesses != UnchangedLeaveOut
		if p.carryUnchanged {
			p.store.procs.keepWholeSamples()
		}
	}
	if cfg.Queries.Enabled {
		if cfg.Queries.Text {
			p.queryText = textCutter(cfg.Queries.TextMaxLength)
		}
		p.queries = querylife.New(querylife.Config{Keep: slices.Max(cfg.Windows), MaxFinished: cfg.Queries.MaxFinished, Text: p.queryText, Opened: opened})
	}
	if len(cfg.TimeConstants) > 0 {
		p.smoother = newSmoother(cfg.TimeConstants)
	}
	return p
}

// processMetrics is the processorhelper function. A snapshot arrives as
// process batches closed by the batch with its snapshot resource
// (docs/pipeline.md rule 1).
func (p *snapshotDiff) processMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	b := snapshot.ReadBatch(md)
	switch b.Kind {
	case snapshot.BatchForeign:
		return md, nil
	case snapshot.BatchProcesses:
		in := p.decoder.decode(md, b)
		sparse := in.processes != nil && slices.ContainsFunc(in.processes.Samples, func(s snapshot.ProcessSample) bool { return s.Sparse })
		err := p.collect(ctx, in)
		rewrite := err == nil && sparse && p.emitProcesses
		if rewrite {
			p.rewriteWhole(md, b, in.processes.Samples)
		}
		p.decoder.release(in)
		if err != nil {
			return md, err
		}
		if !p.emitProcesses {
			return md, processorhelper.ErrSkipProcessingData
		}
		if !rewrite {
			dropHeader(md, b.Header)
		}
		return md, nil
	case snapshot.BatchMerged:
		p.logger.Warn("forwarding a batch without session figures", zap.Error(snapshot.ErrMergedBatch), zap.Int("snapshots", b.Snapshots))
		p.telemetry.SnapshotdiffSnapshotsWithoutFigures.Add(ctx, 1)
	case snapshot.BatchClosing:
		in := p.decoder.decode(md, b)
		figs, err := p.ingest(ctx, in)
		p.decoder.release(in)
		if err != nil {
			p.logger.Warn("snapshot not ingested; forwarding it without session figures", zap.Error(err))
			p.telemetry.SnapshotdiffSnapshotsWithoutFigures.Add(ctx, 1)
		} else {
			p.sendCarried(ctx, pcommon.Timestamp(figs.time), figs.carried)
			p.appendFigures(md, b.Kinds, figs)
			p.telemetry.SnapshotdiffSnapshots.Add(ctx, 1)
		}
	}
	i := 0
	md.ResourceMetrics().RemoveIf(func(pmetric.ResourceMetrics) bool {
		// Resources past Kinds are the ones appendFigures added (query resources and events).
		drop := i < len(b.Kinds) && (isFraming(b.Kinds[i]) || (!p.emitProcesses && b.Kinds[i].HoldsProcesses()))
		i++
		return drop
	})
	return md, nil
}

// isFraming tells the resources that serve the contract between the
// receiver and the processor alone (sparse batches): never forwarded.
func isFraming(k pipeline.ResourceKind) bool {
	return k == pipeline.KindBatch || k == pipeline.KindDeparted || k == pipeline.KindEndings
}

// dropHeader removes a process batch's batch resource, at header (-1: none).
func dropHeader(md pmetric.Metrics, header int) {
	if header < 0 {
		return
	}
	i := 0
	md.ResourceMetrics().RemoveIf(func(pmetric.ResourceMetrics) bool {
		drop := i == header
		i++
		return drop
	})
}

// collect adds a process batch to the snapshot of its time. A batch
// with a batch resource that cannot be ingested is refused, so that the
// receiver sends its host in full next time (sparse batches).
func (p *snapshotDiff) collect(ctx context.Context, in *incoming) error {
	if in.err != nil {
		p.logger.Warn("process batch not ingested", zap.Error(in.err))
		if in.Header >= 0 {
			return in.err
		}
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.openSnapshot(ctx, int64(in.Time)); err != nil {
		p.logger.Warn("process batch not ingested", zap.Error(err))
		if in.Header >= 0 {
			return err
		}
		return nil
	}
	if in.Header >= 0 {
		if err := p.store.acceptBatch(in.header); err != nil {
			p.logger.Warn("process batch refused", zap.Error(err))
			return err
		}
	}
	return p.addDecoded(ctx, in.processes)
}

// openSnapshot makes the store collect the snapshot of time t. A snapshot
// still open at another time never got its closing batch: it is closed
// without host answers, so the counters seen in it stay consistent.
func (p *snapshotDiff) openSnapshot(ctx context.Context, t int64) error {
	if p.store.ingesting {
		if p.store.pendTime == t {
			return nil
		}
		p.logger.Warn("snapshot closed without its snapshot resource (was its closing batch refused?)",
			zap.Time("snapshot", time.Unix(0, p.store.pendTime)), zap.Time("next", time.Unix(0, t)))
		p.telemetry.SnapshotdiffSnapshotsUnclosed.Add(ctx, 1)
		if err := p.store.commit(nil); err != nil {
			return err
		}
	}
	if newest := p.store.windows.newestTime(); newest != 0 && clockstep.SteppedBack(time.Unix(0, newest), time.Unix(0, t)) {
		p.logger.Warn("snapshot much older than the newest: the wall clock went back; window figures start over from it",
			zap.Time("snapshot", time.Unix(0, t)), zap.Time("newest", time.Unix(0, newest)))
		p.store.restartTimeline()
		if p.smoother != nil {
			p.smoother.restartClock()
		}
		if p.queries != nil {
			p.queries.Restart()
		}
	}
	if err := p.store.begin(t); err != nil {
		return fmt.Errorf("snapshot at %s: %w", time.Unix(0, t).UTC().Format(time.RFC3339Nano), err)
	}
	return nil
}

// addDecoded stores what d decoded; the caller holds p.mu. It returns the
// first sparse entry the store could not carry from: the batch is then
// refused, so that the receiver sends its host in full next time.
func (p *snapshotDiff) addDecoded(ctx context.Context, d *snapshot.ProcessDecoder) error {
	skipped, firstErr := d.Skipped, d.Err
	var refuse error
	for i := range d.Samples {
		err := p.store.add(&d.Samples[i])
		if err == nil {
			continue
		}
		skipped++
		if firstErr == nil {
			firstErr = err
		}
		if refuse == nil && errors.As(err, new(errSparseUnknown)) {
			refuse = err
		}
	}
	if skipped > 0 {
		p.logger.Warn("process data skipped", zap.Int("skipped", skipped), zap.Error(firstErr))
		p.telemetry.SnapshotdiffProcessDataSkipped.Add(ctx, int64(skipped))
	}
	return refuse
}

// ingest closes the snapshot with the batch that holds its snapshot resource.
func (p *snapshotDiff) ingest(ctx context.Context, in *incoming) (*figures, error) {
	if in.err != nil {
		return nil, in.err
	}
	if in.departSkipped > 0 {
		p.logger.Warn("departed processes skipped", zap.Int("skipped", in.departSkipped), zap.Error(in.departErr))
		p.telemetry.SnapshotdiffProcessDataSkipped.Add(ctx, int64(in.departSkipped))
	}
	if in.endSkipped > 0 {
		p.logger.Warn("log records and exits skipped", zap.Int("skipped", in.endSkipped), zap.Error(in.endErr))
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.openSnapshot(ctx, int64(in.Time)); err != nil {
		return nil, err
	}
	_ = p.addDecoded(ctx, in.processes) // the closing batch holds no sparse entry
	for _, d := range in.departed {
		for _, proc := range d.Processes {
			p.store.depart(d.Host, d.tmID, proc)
		}
	}
	if err := p.store.commit(in.hosts); err != nil {
		return nil, err
	}
	if n := p.store.hosts.batches.Unaccounted; n > 0 {
		p.logger.Warn("hosts whose process batches the sequence does not account for (lost, refused or out of order) count as not answered; a full batch "+
			"of each is due",
			zap.Int("hosts", n))
	}
	figs := p.store.computeFigures()
	figs.hostNames = slices.Clone(p.store.hosts.names)
	if p.smoother != nil {
		figs.smoothed = p.smoother.update(p.store)
	}
	if p.queries != nil {
		figs.work = p.queries.Update(querySnapshot(p.store, in.activities, in.endings))
		for i := range figs.work.Finished {
			figs.work.Finished[i].Skew = querySkews(figs.work.Finished[i].Segments)
		}
		if n := figs.work.IgnoredEndings; n > 0 {
			p.logger.Debug("log records and exits of no session gpotel follows, or of another backend than the session's, ignored", zap.Int("count", n))
		}
	}
	figs.segments = p.store.computeSegmentFigures(p.emitSessionHosts)
	if p.carryUnchanged {
		figs.carried = p.carriedByHost()
	}
	return figs, nil
}

// rewriteWhole replaces the batch resource and the process resources of
// a batch that held sparse entries with every process of it whole, as the
// store filled them in: the per-process output never leaves a figure out
// (sparse batches).
func (p *snapshotDiff) rewriteWhole(md pmetric.Metrics, b snapshot.Batch, samples []snapshot.ProcessSample) {
	i := 0
	md.ResourceMetrics().RemoveIf(func(pmetric.ResourceMetrics) bool {
		drop := i < len(b.Kinds) && (b.Kinds[i] == pipeline.KindProcess || b.Kinds[i] == pipeline.KindBatch)
		i++
		return drop
	})
	p.appendWhole(md.ResourceMetrics(), b.Time, samples)
}

// appendWhole writes samples of one host and tm_id, every figure they
// hold, as process resources in the processor's scope.
func (p *snapshotDiff) appendWhole(rms pmetric.ResourceMetricsSlice, ts pcommon.Timestamp, samples []snapshot.ProcessSample) {
	if len(samples) == 0 {
		return
	}
	entries := make([]snapshot.ProcessEntry, len(samples))
	for i := range samples {
		entries[i] = samples[i].Entry()
	}
	p.carriedEncoder.Append(rms, &snapshot.ProcessBatch{Time: ts, TmID: samples[0].TmID, Host: samples[0].Host,
		Kind: pipeline.KindProcess, Entries: entries}, nil)
}

// carriedByHost copies out the last sightings of the processes the store
// carried unchanged, grouped by host (and tm_id); the caller holds p.mu.
// A sample is far smaller than its points, and the points are written one
// host at a time outside the lock (sendCarried).
func (p *snapshotDiff) carriedByHost() [][]snapshot.ProcessSample {
	rows := p.store.carried
	slices.SortFunc(rows, func(a, b uint32) int {
		return cmp.Or(cmp.Compare(p.store.procs.keys[a].host, p.store.procs.keys[b].host), cmp.Compare(a, b))
	})
	var out [][]snapshot.ProcessSample
	for from := 0; from < len(rows); {
		host := p.store.procs.keys[rows[from]].host
		tmID := p.store.procs.sample[rows[from]].TmID
		to := from + 1
		for to < len(rows) && p.store.procs.keys[rows[to]].host == host && p.store.procs.sample[rows[to]].TmID == tmID {
			to++
		}
		group := make([]snapshot.ProcessSample, to-from)
		for i, row := range rows[from:to] {
			group[i] = p.store.procs.sample[row]
		}
		out = append(out, group)
		from = to
	}
	return out
}

// sendCarried hands on the processes carried unchanged, one batch per
// host, ahead of the snapshot's closing output, so that the per-process
// output stays dense without a batch the size of the cluster. A batch the
// next consumer refuses is logged and counted; the others still go.
func (p *snapshotDiff) sendCarried(ctx context.Context, ts pcommon.Timestamp, carried [][]snapshot.ProcessSample) {
	for _, group := range carried {
		md := pmetric.NewMetrics()
		p.appendWhole(md.ResourceMetrics(), ts, group)
		if err := p.next.ConsumeMetrics(ctx, md); err != nil {
			p.logger.Warn("carried processes of a host not handed on", zap.String("host", group[0].Host), zap.Int("processes", len(group)), zap.Error(err))
			p.telemetry.SnapshotdiffCarriedBatchesFailed.Add(ctx, 1)
		}
	}
}

// appendFigures adds the cluster figures to the snapshot resource, the
// session figures to every session resource, and the query resources.
func (p *snapshotDiff) appendFigures(md pmetric.Metrics, kinds []pipeline.ResourceKind, figs *figures) {
	rms := md.ResourceMetrics()
	ts := pcommon.Timestamp(figs.time)
	for i, kind := range kinds {
		switch kind {
		case pipeline.KindSnapshot:
			p.out.AppendCluster(rms.At(i), ts, outputCluster(figs))
		case pipeline.KindSession:
			key, ok := pipeline.SessionKeyOf(rms.At(i).Resource().Attributes())
			if !ok {
				p.logger.Warn("session resource lacks " + pipeline.AttrSessionID + "; no figures for it")
				continue
			}
			p.out.AppendSession(rms.At(i), ts, outputSession(figs, key))
		}
	}
	for i := range figs.work.Queries {
		p.out.AppendQuery(rms, ts, outputQuery(&figs.work.Queries[i], p.queryText))
	}
	for i := range figs.work.Finished {
		events.AppendFinishedQuery(rms, &figs.work.Finished[i])
	}
	for i := range figs.work.Ended {
		events.AppendEndedSession(rms, &figs.work.Ended[i])
	}
}
