// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/gpotel/gpotel/internal/await"
)

// storageHost is a collector host with one storage extension.
type storageHost struct {
	component.Host
	extensions map[component.ID]component.Component
}

func (h storageHost) GetExtensions() map[component.ID]component.Component { return h.extensions }

// collector is what a collector restart replaces: the file_storage
// extension on dir and the history exporter that keeps its queue there.
type collector struct {
	storage  extension.Extension
	exporter *historyExporter
}

var fileStorageID = component.MustNewID("file_storage")

func startCollector(t *testing.T, cfg *Config, dir string, tel *componenttest.Telemetry) *collector {
	t.Helper()
	ctx := context.Background()
	f := filestorage.NewFactory()
	scfg := f.CreateDefaultConfig().(*filestorage.Config)
	scfg.Directory, scfg.Compaction.Directory = dir, dir
	ext, err := f.Create(ctx, extensiontest.NewNopSettings(f.Type()), scfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	c := &collector{storage: ext, exporter: newExporterAt(t, cfg, tel, nil)}
	host := storageHost{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{fileStorageID: ext}}
	if err := c.exporter.start(ctx, host); err != nil {
		t.Fatalf("start: %v", err)
	}
	return c
}

func (c *collector) stop(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := c.exporter.shutdown(ctx); err != nil {
		t.Error(err)
	}
	if err := c.storage.Shutdown(ctx); err != nil {
		t.Error(err)
	}
}

func (c *collector) failedAttempts() int64 {
	c.exporter.mu.Lock()
	defer c.exporter.mu.Unlock()
	return c.exporter.failedAttempts
}

// The history database is stopped while three batches of events arrive
// (three collection intervals), and the collector restarts in the middle
// of it: once the database is back, every event is in its table exactly
// once, and none was dropped.
func TestHistorySurvivesDatabaseOutage(t *testing.T) {
	for _, target := range historyTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			db := target.start(t)
			if db.stopServer == nil {
				t.Skipf("the test may not stop this server: set %s and %s", gp6StopVariable, gp6StartVariable)
			}
			survivesOutage(t, db)
		})
	}
}

func survivesOutage(t *testing.T, db *historyDB) {
	cfg := *db.cfg
	cfg.Storage = &fileStorageID
	dir := t.TempDir()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	ctx := await.Context(t)

	const perBatch = 10
	batches := 0
	end := middayToday()
	send := func(c *collector) {
		t.Helper()
		ld := workload(batches*perBatch, perBatch, end.Add(time.Duration(batches*perBatch)*time.Second))
		batches++
		if err := c.exporter.consumeLogs(ctx, ld); err != nil {
			t.Fatalf("batch %d: %v", batches, err)
		}
	}
	// sendWhileDown sends a batch and waits until the exporter has tried
	// (and failed) to write it.
	sendWhileDown := func(c *collector) {
		t.Helper()
		before := c.failedAttempts()
		send(c)
		await.Until(t, fmt.Sprintf("a failed write after batch %d", batches), func() bool { return c.failedAttempts() > before })
	}

	c := startCollector(t, &cfg, dir, tel)
	send(c)
	db.awaitRows(t, tableQueries, perBatch)

	if err := db.stopServer(ctx); err != nil {
		t.Fatal(err)
	}
	sendWhileDown(c)
	sendWhileDown(c)
	c.stop(t)
	c = startCollector(t, &cfg, dir, tel)
	if events, _ := c.exporter.queue.size(); events != 2*(perBatch+perBatch/queriesPerSession) {
		t.Errorf("after the restart the queue holds %d events, want the two batches sent during the outage", events)
	}
	sendWhileDown(c)
	if err := db.startServer(ctx); err != nil {
		t.Fatal(err)
	}
	reconnectAdmin(t, db)
	send(c)

	// An entry leaves the queue once its rows are committed (or it is
	// dropped, counted): past this wait, every row is in or lost for good,
	// so a lost row fails the test here instead of leaving it to wait.
	await.Until(t, "an empty queue", func() bool { events, _ := c.exporter.queue.size(); return events == 0 })
	want := int64(batches * perBatch)
	if n := db.count(t, "SELECT count(*) FROM gpotel_history."+tableQueries); n != want {
		t.Errorf("%d query rows, want %d", n, want)
	}
	if n := db.count(t, "SELECT count(*) FROM gpotel_history."+tableSessions); n != want/queriesPerSession {
		t.Errorf("%d session rows, want %d", n, want/queriesPerSession)
	}
	if n := db.count(t, "SELECT count(DISTINCT (tm_id, sess_id, query_start, ccnt)) FROM gpotel_history.queries"); n != want {
		t.Errorf("%d distinct queries, want %d", n, want)
	}
	c.stop(t)
	assertNothingDropped(t, tel)
}

// reconnectAdmin replaces the test's own connection after the server restarted.
func reconnectAdmin(t *testing.T, db *historyDB) {
	t.Helper()
	cc := db.admin.Config().Copy()
	await.NoError(t, "the database answering again", func() error {
		conn, err := pgx.ConnectConfig(context.Background(), cc)
		if err == nil {
			_ = db.admin.Close(context.Background())
			db.admin = conn
		}
		return err
	})
}
