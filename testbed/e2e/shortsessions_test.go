// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// TestShortSessionsTellHowTheyEnded runs sessions as the churn workload's
// (connect, a short statement, disconnect; each seen by one snapshot and
// gone about a scrape later), several at once as make run does, on the
// collector of config/testbed.yaml: every one's session event says it
// ended by a client disconnect, as its coordinator backend's exit record
// tells (issue 42: 1 % of them ended unknown).
func TestShortSessionsTellHowTheyEnded(t *testing.T) {
	needBinaries(t)
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP6})
	ctx := await.Context(t)
	s := launch(ctx, t, c, StackOptions{
		Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 400,
		// A session whose exit is lost waits for it the longest window: keep it short.
		CollectorArgs: []string{"--set=processors::snapshotdiff::windows=[3s,6s]", "--set=exporters::sessionstate::last_metrics_window=3s"},
	})
	api := dialAPI(t, s.API)
	waitFor(t, "the collector's first snapshot", func() (bool, string) {
		states, err := allSessions(ctx, api)
		return err == nil && len(states) > 0, fmt.Sprint(err)
	})

	const streams, sessionsPerStream = 6, 8
	var (
		mu       sync.Mutex
		sessions []int64
	)
	oneSession := func() error {
		conn, sessID, err := connectSession(ctx, c)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(context.Background()) }()
		// Seen by a snapshot (its events exist), then a short statement and gone.
		if err := await.Poll(ctx, func() error {
			st, err := stateOf(ctx, api, int(sessID))
			if err != nil || st == nil {
				return fmt.Errorf("session %d not in the API yet (%v)", sessID, err)
			}
			return nil
		}); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "SELECT pg_sleep(0.2)"); err != nil {
			return err
		}
		pid := int(conn.PgConn().PID())
		if err := conn.Close(ctx); err != nil {
			return err
		}
		mu.Lock()
		sessions = append(sessions, sessID)
		mu.Unlock()
		return awaitExit(ctx, pid)
	}
	runStreams(t, streams, func(done int) bool { return done < sessionsPerStream }, oneSession)

	var ended map[int64]*events.EndedSession
	waitFor(t, "every session's event", func() (bool, string) {
		ended = endedSessions(t, s)
		var missing []int64
		for _, id := range sessions {
			if ended[id] == nil {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no event yet of sessions %v", missing)
	})
	for _, id := range sessions {
		if ev := ended[id]; ev.EndReason != events.SessionClientDisconnect {
			t.Errorf("session %d ended %q (%s), want %q: its backend disconnected cleanly", id, ev.EndReason, ev.Message, events.SessionClientDisconnect)
		}
	}
	t.Logf("%d short sessions, each ended by a client disconnect", len(sessions))
}

// TestUnreadSessionsTellHowTheyEnded runs sessions too short for most
// scrapes to read (connect, one statement, disconnect within a second),
// many streams at once: some connect between a scrape's two catalog reads
// (the backends', then the sessions') and are gone by the next scrape,
// others are listed and gone before the agent's read. Only the coordinator
// backend's exit record, attributed through the scrape's listing, tells how
// they ended: every session the collector wrote an event of ended by a
// client disconnect (make run of 80898a3: one of 39 churn sessions ended unknown).
func TestUnreadSessionsTellHowTheyEnded(t *testing.T) {
	needBinaries(t)
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP6})
	ctx := await.Context(t)
	s := launch(ctx, t, c, StackOptions{
		Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 4000,
		CollectorArgs: []string{"--set=processors::snapshotdiff::windows=[3s,6s]", "--set=exporters::sessionstate::last_metrics_window=3s",
			"--set=service::telemetry::logs::level=debug"},
	})
	api := dialAPI(t, s.API)
	waitFor(t, "the collector's first snapshot", func() (bool, string) {
		states, err := allSessions(ctx, api)
		return err == nil && len(states) > 0, fmt.Sprint(err)
	})

	const streams, runFor, longest = 12, 90 * time.Second, time.Second
	var (
		mu   sync.Mutex
		pids = map[int64]uint32{} // sess_id → coordinator backend pid
	)
	oneSession := func() error {
		conn, sessID, err := connectSession(ctx, c)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(context.Background()) }()
		pid := conn.PgConn().PID()
		mu.Lock()
		pids[sessID] = pid
		mu.Unlock()
		select { // the session's length: the workload's shape, as churn's Interval
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(rand.N(longest)):
		}
		if err := conn.Close(ctx); err != nil {
			return err
		}
		return awaitExit(ctx, int(pid))
	}
	until := time.Now().Add(runFor)
	runStreams(t, streams, func(int) bool { return time.Now().Before(until) }, oneSession)
	// A last session, listed after every other one exited: once its event
	// is out, every snapshot that listed one of them is too.
	marker := openSeenSession(ctx, t, c, api)

	var (
		ended  map[int64]*events.EndedSession
		listed map[int64]bool
	)
	waitFor(t, "the event of every session a snapshot listed", func() (bool, string) {
		ended = endedSessions(t, s)
		listed = listedSessions(s.Sink.Received(), pids)
		var missing []int64
		for id := range listed {
			if ended[id] == nil {
				missing = append(missing, id)
			}
		}
		if ended[marker] == nil {
			return false, fmt.Sprintf("no event yet of the last session %d", marker)
		}
		return len(missing) == 0, fmt.Sprintf("no event yet of listed sessions %v", missing)
	})
	unread := 0
	for id := range listed {
		ev := ended[id]
		if ev.Known == 0 {
			unread++
		}
		if ev.EndReason != events.SessionClientDisconnect {
			t.Errorf("session %d (coordinator pid %d, %s–%s, read alive: %t) ended %q (%s), want %q; the collector logged:\n%s",
				id, pids[id], time.Unix(0, ev.Start).UTC().Format("15:04:05.000"), time.Unix(0, ev.End).UTC().Format("15:04:05.000"),
				ev.Known != 0, ev.EndReason, ev.Message, events.SessionClientDisconnect, linesNaming(s.Collector.Log, id, int64(pids[id])))
		}
	}
	t.Logf("%d sessions run, %d listed by a snapshot, %d of them never read alive", len(pids), len(listed), unread)
}

// openSeenSession opens a session, waits until the API shows it, closes it
// and returns its sess_id.
func openSeenSession(ctx context.Context, t *testing.T, c *cluster.Cluster, api yagpcc.GetGPInfoClient) int64 {
	t.Helper()
	conn, sessID, err := connectSession(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	waitFor(t, "the last session in the API", func() (bool, string) {
		st, err := stateOf(ctx, api, int(sessID))
		return err == nil && st != nil, fmt.Sprintf("session %d not in the API yet (%v)", sessID, err)
	})
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return sessID
}

// listedSessions are the sessions of ids that a snapshot's session
// resource names.
func listedSessions(received []pmetric.Metrics, ids map[int64]uint32) map[int64]bool {
	out := map[int64]bool{}
	for _, md := range received {
		for _, rm := range md.ResourceMetrics().All() {
			attrs := rm.Resource().Attributes()
			if pipeline.KindOf(attrs) != pipeline.KindSession {
				continue
			}
			if id := pipeline.IntOf(attrs, pipeline.AttrSessionID).V; ids[id] != 0 {
				out[id] = true
			}
		}
	}
	return out
}

// linesNaming are the lines of the log file that name the session or its pid.
func linesNaming(path string, session, pid int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, strconv.FormatInt(session, 10)) || strings.Contains(line, strconv.FormatInt(pid, 10)) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// runStreams runs one session after another in each of streams goroutines
// while more says so (given how many that stream ran), and fails t with
// the first error of each stream.
func runStreams(t *testing.T, streams int, more func(done int) bool, one func() error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for range streams {
		wg.Go(func() {
			for done := 0; more(done); done++ {
				if err := one(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// endedSessions are the session events the sink holds, by sess_id; it
// fails t if the collector exited.
func endedSessions(t *testing.T, s *Stack) map[int64]*events.EndedSession {
	t.Helper()
	if exited, err := s.Collector.Exited(); exited {
		t.Fatalf("the collector exited (%v): %s", err, s.Collector.LogTail(2000))
	}
	ended := map[int64]*events.EndedSession{}
	for _, lr := range s.Sink.LogRecords() {
		if lr.EventName() != events.EventSessionEnd {
			continue
		}
		if ev, err := pipelinetest.DecodeSessionEvent(lr.Attributes()); err == nil {
			ended[ev.Session.ID] = &ev
		}
	}
	return ended
}

// connectSession opens a session on the coordinator and reads its sess_id.
func connectSession(ctx context.Context, c *cluster.Cluster) (*pgx.Conn, int64, error) {
	conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		return nil, 0, err
	}
	var sessID int64
	if err := conn.QueryRow(ctx, cluster.MySessIDSQL).Scan(&sessID); err != nil {
		_ = conn.Close(context.Background())
		return nil, 0, err
	}
	return conn, sessID, nil
}
