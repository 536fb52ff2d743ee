// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpotel/gpotel/exporter/historyexporter/internal/metadata"
)

// The reasons of history_events_dropped.
const (
	reasonQueueFull          = "queue_full"
	reasonInvalid            = "invalid"
	reasonEndOutOfRange      = "end_out_of_range"
	reasonRejectedByDatabase = "rejected_by_database"
	reasonStorageError       = "storage_error"
	reasonDamaged            = "damaged"
)

// retentionInterval: how often old days are looked for; a day is dropped
// within this of its last instant passing the retention.
const retentionInterval = time.Hour

// historyExporter takes the finished-work events into its queue at once
// (a slow or absent database never holds the pipeline back) and writes
// them from there in a goroutine of its own.
type historyExporter struct {
	cfg       *Config
	set       exporter.Settings
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	store     *store

	client storage.Client
	queue  *queue
	cancel context.CancelFunc
	done   chan struct{}
	host   component.Host // the status is reported to it

	mu sync.Mutex
	// droppedInOutage counts queue_full drops since the database last took
	// a batch; the first of them is logged, the total when it takes one.
	droppedInOutage int64
	// failedAttempts counts failed writes since the database last took
	// a batch.
	failedAttempts int64
	// answer is what the database answered the last failed attempt, ""
	// since one worked: each answer is logged and reported once.
	answer string
	// rejectionLogged: each reason of a rejected event is logged once.
	rejectionLogged map[string]bool
	// replacedLogged: characters replaced for the encoding are logged once.
	replacedLogged bool
}

func newHistoryExporter(cfg *Config, set exporter.Settings) (*historyExporter, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &historyExporter{cfg: cfg, set: set, logger: set.Logger, telemetry: tb, store: newStore(cfg), rejectionLogged: map[string]bool{}}, nil
}

func (e *historyExporter) start(ctx context.Context, host component.Host) error {
	e.host = host
	client, err := e.storageClient(ctx, host)
	if err != nil {
		return err
	}
	if err := e.openQueue(ctx, client); err != nil {
		_ = client.Close(ctx)
		return err
	}
	q := e.queue
	if err := errors.Join(
		e.telemetry.RegisterHistoryQueueEventsCallback(func(_ context.Context, o metric.Int64Observer) error {
			events, _ := q.size()
			o.Observe(events)
			return nil
		}),
		e.telemetry.RegisterHistoryQueueSizeCallback(func(_ context.Context, o metric.Int64Observer) error {
			_, bytes := q.size()
			o.Observe(bytes)
			return nil
		})); err != nil {
		return err
	}

	if c := e.cfg; c.Insecure && c.UnverifiedBeyondLoopback() {
		e.logger.Warn("history connection beyond this host without checking the server's certificate (insecure: true): anyone on the path may read the "+
			"events or pose as the database",
			zap.String("host", c.Host), zap.String("sslmode", c.SSLMode))
	}
	// Whatever the database answers (nothing, or a refusal that needs a
	// person), the history's trouble never stops the collector: the
	// events wait in the queue and the writer tries again.
	openCtx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	err = e.store.open(openCtx)
	cancel()
	if err != nil {
		e.noteAnswer(err, e.cfg.Retry.InitialInterval)
	} else {
		e.logger.Info("History tables ready", zap.String("dialect", string(e.store.dialect)), zap.String("schema", e.cfg.Schema))
	}

	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	e.cancel, e.done = stop, make(chan struct{})
	go e.run(runCtx)
	return nil
}

// openQueue opens the queue in client, counting what it dropped.
func (e *historyExporter) openQueue(ctx context.Context, client storage.Client) error {
	q, dropped, err := openQueue(ctx, client, e.cfg.Queue.MaxBytes)
	if err != nil {
		return err
	}
	e.client, e.queue = client, q
	if events, _ := q.size(); events > 0 {
		e.logger.Info("History events left queued by the last run", zap.Int64("events", events))
	}
	if dropped > 0 {
		e.noteDropped(ctx, reasonQueueFull, dropped)
	}
	if q.damage.why != "" {
		e.noteRejected(ctx, reasonDamaged, q.damage.events, "queue storage: "+q.damage.why)
	}
	return nil
}

func (e *historyExporter) storageClient(ctx context.Context, host component.Host) (storage.Client, error) {
	if e.cfg.Storage == nil {
		e.logger.Info("No storage extension configured: the history queue is in memory and does not outlive a restart")
		return newMemoryClient(), nil
	}
	ext, ok := host.GetExtensions()[*e.cfg.Storage]
	if !ok {
		return nil, fmt.Errorf("history: storage %s: no such extension in the service", e.cfg.Storage)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("history: storage %s is not a storage extension", e.cfg.Storage)
	}
	client, err := se.GetClient(ctx, component.KindExporter, e.set.ID, "events")
	if err != nil {
		return nil, fmt.Errorf("history: storage %s: %w", e.cfg.Storage, err)
	}
	return client, nil
}

func (e *historyExporter) shutdown(ctx context.Context) error {
	if e.cancel != nil {
		e.cancel()
		select {
		case <-e.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e.store.close(ctx)
	e.telemetry.Shutdown()
	if e.client != nil {
		if events, _ := e.queue.size(); events > 0 {
			msg := "History events stay queued for the next run"
			if e.cfg.Storage == nil {
				msg = "History events lost at shutdown: the queue is in memory (configure storage)"
			}
			e.logger.Info(msg, zap.Int64("events", events))
		}
		return e.client.Close(ctx)
	}
	return nil
}

// consumeLogs encodes the finished-work events of ld as rows and queues
// them; other records are not the exporter's. It never waits for the
// database.
func (e *historyExporter) consumeLogs(ctx context.Context, ld plog.Logs) error {
	oldest, newest := e.window()
	en := encodeEvents(ld, e.store.tables, oldest, newest)
	for reason, n := range en.rejected {
		e.noteRejected(ctx, reason, n, en.why[reason])
	}
	events := en.events()
	if events == 0 {
		return nil
	}
	dropped, err := e.queue.push(ctx, events, en.payload)
	if err != nil {
		e.noteDropped(ctx, reasonStorageError, events)
		return consumererror.NewPermanent(fmt.Errorf("history: %w", err))
	}
	if dropped > 0 {
		e.noteDropped(ctx, reasonQueueFull, dropped)
	}
	return nil
}

// window is when an event may end: within the retention (an older day
// is dropped, or about to be), and at most maxFutureEnd ahead.
func (e *historyExporter) window() (oldest, newest time.Time) {
	now := e.store.now()
	oldest = earliestTime
	if e.cfg.Retention > 0 {
		oldest = now.Add(-e.cfg.Retention)
	}
	return oldest, now.Add(maxFutureEnd)
}

// run writes what is queued until ctx ends, waiting after a failed write
// (doubling the wait up to retry::max_interval), and drops old days once
// an hour.
func (e *historyExporter) run(ctx context.Context) {
	defer close(e.done)
	retention := time.NewTicker(retentionInterval)
	defer retention.Stop()
	retentionDue := true
	wait := e.cfg.Retry.InitialInterval
	for {
		if retentionDue && e.dropOldDays(ctx) == nil {
			retentionDue = false
		}
		select {
		case <-ctx.Done():
			return
		case <-retention.C:
			retentionDue = true
			continue
		case <-e.queue.ready:
		}
		if err := e.writeQueued(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			e.noteFailure(err, wait)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, e.cfg.Retry.MaxInterval)
			continue
		}
		wait = e.cfg.Retry.InitialInterval
	}
}

// writeQueued writes the oldest queued events, up to batch::max_events,
// in one transaction.
func (e *historyExporter) writeQueued(ctx context.Context) error {
	infos, payloads, err := e.queue.take(ctx, int64(e.cfg.Batch.MaxEvents))
	if err != nil {
		e.finish(ctx, false)
		return err
	}
	if len(infos) == 0 {
		e.finish(ctx, true)
		return nil
	}
	b := e.batchOf(infos, payloads)
	var written [tableCount]int64
	var replaced int64
	if b.events() > 0 {
		if written, replaced, err = e.write(ctx, b); err != nil {
			e.finish(ctx, false)
			return err
		}
	}
	e.finish(ctx, true)
	for i, n := range written {
		e.telemetry.HistoryEventsWritten.Add(ctx, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("table", e.store.tables[i].Name))))
	}
	if replaced > 0 {
		e.telemetry.HistoryCharactersReplaced.Add(ctx, replaced)
		e.noteReplaced(replaced)
	}
	for reason, n := range b.rejected {
		e.noteRejected(ctx, reason, n, b.why[reason])
	}
	return nil
}

// batchOf gathers the queued entries into one batch of rows. An entry
// whose payload is missing or does not decode is dropped, its events
// counted as damaged.
func (e *historyExporter) batchOf(infos []entryInfo, payloads [][]byte) *batch {
	b := newBatch(e.store.tables)
	for i, p := range payloads {
		en, err := unmarshalEntry(p)
		if err != nil {
			b.reject(reasonDamaged, infos[i].events, fmt.Sprintf("queued entry %d: %v", infos[i].seq, err))
			continue
		}
		b.add(en)
	}
	return b
}

// write writes b in one transaction under the timeout, its characters
// fitted to the database's encoding; a batch the server refuses for its
// data is written in halves (writeHalves). It returns the rows written
// and the characters replaced.
func (e *historyExporter) write(ctx context.Context, b *batch) (written [tableCount]int64, replaced int64, err error) {
	wctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	if err := e.store.open(wctx); err != nil {
		return written, 0, err
	}
	replaced = b.fit(e.store.charset)
	written, err = e.store.write(wctx, b)
	if err == nil || !dataError(err) {
		return written, replaced, err
	}
	for i := range b.tables {
		if rows := b.tables[i].all(); len(rows) > 0 {
			if err := e.writeHalves(ctx, b, i, rows, &written, err); err != nil {
				return written, replaced, err
			}
		}
	}
	return written, replaced, nil
}

// writeHalves writes rows of table i of b in one transaction, and when
// the server refuses them for their data, each half in turn, down to the
// rows it refuses, which are left out, counted. A refused row costs its
// own row and about twice log2(rows) transactions, each under its own
// timeout, so the rows around it are written in a few large ones however
// many there are. A half written by an earlier attempt is not written
// again: each transaction looks for rows ending within the whole batch's
// end times (writeTable).
func (e *historyExporter) writeHalves(ctx context.Context, b *batch, i int, rows []queuedRow, written *[tableCount]int64, cause error) error {
	wctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	n, err := e.store.write(wctx, b.only(i, rows))
	cancel()
	switch {
	case err == nil:
		written[i] += n[i]
		return nil
	case !dataError(err):
		return err
	case len(rows) == 1:
		b.reject(reasonRejectedByDatabase, 1, fmt.Sprintf("%s row: %v (the batch: %v)", b.tables[i].t.Name, err, cause))
		return nil
	}
	half := len(rows) / 2
	if err := e.writeHalves(ctx, b, i, rows[:half], written, cause); err != nil {
		return err
	}
	return e.writeHalves(ctx, b, i, rows[half:], written, cause)
}

// dropOldDays runs the retention and counts what it dropped.
func (e *historyExporter) dropOldDays(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	dropped, err := e.store.dropOldDays(rctx)
	for i, n := range dropped {
		if n > 0 {
			e.telemetry.HistoryPartitionsDropped.Add(ctx, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("table", e.store.tables[i].Name))))
			e.logger.Info("History retention dropped whole days", zap.String("table", e.store.tables[i].Name), zap.Int64("partitions", n),
				zap.Duration("retention", e.cfg.Retention))
		}
	}
	switch {
	case err == nil && e.cfg.Retention > 0: // retention 0 asks the database nothing
		e.noteAnswered()
	case ctx.Err() == nil:
		e.logger.Debug("History retention did not run", zap.Error(err))
		e.noteAnswer(err, 0)
	}
	return err
}

// finish reports a write's outcome to the queue and closes an outage
// when the database took the batch.
func (e *historyExporter) finish(ctx context.Context, written bool) {
	lost, err := e.queue.done(ctx, written)
	if err != nil {
		e.logger.Warn("History queue storage could not forget written events; they may be offered again (and left out) after a restart", zap.Error(err))
	}
	if lost > 0 {
		e.noteDropped(ctx, reasonQueueFull, lost)
	}
	if written {
		e.noteAnswered()
	}
}
