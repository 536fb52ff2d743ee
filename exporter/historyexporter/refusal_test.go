// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpotel/gpotel/exporter/historyexporter/internal/metadatatest"
	"github.com/gpotel/gpotel/internal/await"
)

// statusHost is a collector host with one storage extension that keeps
// the status events its components report.
type statusHost struct {
	storageHost
	mu     sync.Mutex
	events []*componentstatus.Event
}

func (h *statusHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
}

func (h *statusHost) last() *componentstatus.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) == 0 {
		return nil
	}
	return h.events[len(h.events)-1]
}

// A history database that answers with a refusal (here: its CONNECT
// right revoked during an outage) does not stop the collector: the
// exporter, made by its factory as the collector makes it, starts with
// its queue on disk, says once what the database answered, counts each
// refusal and reports a recoverable error; once the right is back, the
// queued events are written, once each, and the status is OK again.
func TestARefusingHistoryDatabaseDoesNotStopTheCollector(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	db := startTestbedHistoryDB(t)
	ctx := await.Context(t)
	dir := t.TempDir()
	fs := filestorage.NewFactory()
	scfg := fs.CreateDefaultConfig().(*filestorage.Config)
	scfg.Directory, scfg.Compaction.Directory = dir, dir
	newStorage := func() component.Component {
		ext, err := fs.Create(ctx, extensiontest.NewNopSettings(fs.Type()), scfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := ext.Start(ctx, componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		return ext
	}
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	logs, logged := observer.New(zapcore.DebugLevel)
	f := NewFactory()
	create := func(cfg *Config, host component.Host) exporter.Logs {
		set := metadatatest.NewSettings(tel)
		set.Logger = zap.New(logs)
		exp, err := f.CreateLogs(ctx, set, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Start(ctx, host); err != nil {
			t.Fatalf("start: %v; the history's trouble must not stop the collector", err)
		}
		return exp
	}

	// A first run, the database out of reach, leaves 10 queries and their
	// sessions in the queue on disk, in two batches.
	down := *db.cfg
	down.Storage, down.Host, down.Port = &fileStorageID, "127.0.0.1", 1
	storage := newStorage()
	exp := create(&down, storageHost{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{fileStorageID: storage}})
	for first := 0; first < 10; first += 5 {
		if err := exp.ConsumeLogs(ctx, workload(first, 5, middayToday().Add(time.Duration(first)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(exp.Shutdown(ctx), storage.Shutdown(ctx)); err != nil {
		t.Fatal(err)
	}

	// The database answers again, but refuses the role.
	for _, s := range []string{"REVOKE CONNECT ON DATABASE gpotel_history FROM PUBLIC", "REVOKE CONNECT ON DATABASE gpotel_history FROM gpotel_history"} {
		if _, err := db.admin.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	cfg := *db.cfg
	cfg.Storage = &fileStorageID
	storage = newStorage()
	host := &statusHost{storageHost: storageHost{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{fileStorageID: storage}}}
	exp = create(&cfg, host)
	t.Cleanup(func() { _ = errors.Join(exp.Shutdown(context.Background()), storage.Shutdown(context.Background())) })
	await.NoError(t, "three refusals counted", func() error {
		if n := counted(t, tel, "otelcol_history_database_refusals", "", ""); n < 3 {
			return fmt.Errorf("%d counted", n)
		}
		return nil
	})
	if ev := host.last(); ev == nil || ev.Status() != componentstatus.StatusRecoverableError || !strings.Contains(fmt.Sprint(ev.Err()), "permission "+
		"denied for database") {
		t.Errorf("status %+v; want a recoverable error saying what the database answered", ev)
	}
	refusals := logged.FilterMessageSnippet("refused the exporter").All()
	if len(refusals) != 1 || !strings.Contains(fmt.Sprint(refusals[0].ContextMap()), "permission denied for database") {
		t.Errorf("the refusal logged %d times (%v); want once, with what the database answered", len(refusals), refusals)
	}

	if _, err := db.admin.Exec(ctx, "GRANT CONNECT ON DATABASE gpotel_history TO gpotel_history"); err != nil {
		t.Fatal(err)
	}
	db.awaitRows(t, tableQueries, 10)
	db.awaitRows(t, tableSessions, 10/queriesPerSession)
	if n := db.count(t, "SELECT count(DISTINCT (tm_id, sess_id, query_start, ccnt)) FROM gpotel_history.queries"); n != 10 {
		t.Errorf("%d distinct queries, want 10", n)
	}
	await.Until(t, "the status OK again", func() bool { ev := host.last(); return ev != nil && ev.Status() == componentstatus.StatusOK })
	if n := len(logged.FilterMessageSnippet("takes events again").All()); n != 1 {
		t.Errorf("the recovery logged %d times, want once", n)
	}
	assertNothingDropped(t, tel)
}
