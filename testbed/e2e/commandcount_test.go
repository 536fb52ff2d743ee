// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// coordinatorTitle matches a Greenplum coordinator backend's title:
// con<session> cmd<count> <activity>.
var coordinatorTitle = regexp.MustCompile(` con([0-9]+) cmd([0-9]+) (.*)$`)

// titleCount reads the session and command count of pid's process title
// (the truth the test holds gpotel to) and its activity; ok false when the
// title has none.
func titleCount(pid int) (sess, ccnt int64, activity string, ok bool, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, 0, "", false, err
	}
	m := coordinatorTitle.FindSubmatch(bytes.TrimRight(bytes.ReplaceAll(b, []byte{0}, []byte{' '}), " "))
	if m == nil {
		return 0, 0, string(b), false, nil
	}
	sess, _ = strconv.ParseInt(string(m[1]), 10, 64)
	ccnt, _ = strconv.ParseInt(string(m[2]), 10, 64)
	return sess, ccnt, string(m[3]), true, nil
}

// numberedStatement is one statement of the test's session and the command
// count the coordinator backend's title gave it.
type numberedStatement struct {
	name       string
	sent, done time.Time
	ccnt       int64 // 0: the title had none
}

// Every finished query's event, history row and GetGPQuery answer carry the
// command count of its coordinator backend's title: the running title's for
// a statement a snapshot saw running, the idle title's right after it for
// one shorter than a snapshot interval (simple and extended protocol, a
// utility statement, one that fails). On PostgreSQL, which numbers no
// command, the field is absent and the column NULL.
func TestFinishedQueriesCarryTheCommandCount(t *testing.T) {
	for _, opts := range cluster.SmallClusters(1) {
		t.Run(string(opts.Dialect), func(t *testing.T) {
			needBinaries(t)
			c := cluster.Start(t, opts)
			ctx := await.Context(t)
			if err := c.CreateHistoryDatabase(ctx); err != nil {
				t.Fatal(err)
			}
			const interval, longestWindow = time.Second, 6 * time.Second
			s := launch(ctx, t, c, StackOptions{
				Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 100,
				CollectorArgs: []string{
					"--config=" + configPath("history.yaml"),
					"--set=receivers::gpsession::collection_interval=" + interval.String(),
					"--set=processors::snapshotdiff::windows=[3s," + longestWindow.String() + "]",
					"--set=exporters::sessionstate::last_metrics_window=3s",
				},
			})
			api := dialAPI(t, s.API)
			greenplum := opts.Dialect != dialect.PostgreSQL
			waitFor(t, "the collector's first snapshot", func() (bool, string) {
				states, err := allSessions(ctx, api)
				return err == nil && len(states) > 0, fmt.Sprint(err)
			})

			cfg, err := pgx.ParseConfig(c.CoordinatorDSN)
			if err != nil {
				t.Fatal(err)
			}
			cfg.RuntimeParams["application_name"] = "gpotel-ccnt"
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close(context.Background()) })
			pid := int(conn.PgConn().PID())
			sessID := int64(pid)
			if greenplum {
				if err := conn.QueryRow(ctx, "SELECT sess_id FROM pg_catalog.pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&sessID); err != nil {
					t.Fatal(err)
				}
			}
			// truth reads the title now: its command count, checking its session.
			truth := func(wantActivity func(string) bool) int64 {
				var ccnt int64
				await.NoError(t, "the coordinator backend's title", func() error {
					sess, n, activity, ok, err := titleCount(pid)
					switch {
					case err != nil:
						return err
					case !greenplum && ok:
						return fmt.Errorf("a PostgreSQL title with a command count: %s", activity)
					case !greenplum:
						return nil
					case !ok:
						t.Fatalf("no con<N> cmd<M> in the title %q: the testbed gives Greenplum's titles", activity)
					case sess != sessID:
						t.Fatalf("the title says con%d, pg_stat_activity sess_id %d", sess, sessID)
					case !wantActivity(activity):
						return fmt.Errorf("title activity %q", activity)
					}
					ccnt = n
					return nil
				})
				return ccnt
			}
			isIdle := func(a string) bool { return a == "idle" }
			snapshotAfter := func(at time.Time, what string) {
				waitFor(t, "a snapshot of the session idle after "+what, func() (bool, string) {
					ss, err := stateOf(ctx, api, int(sessID))
					if err != nil || ss == nil {
						return false, fmt.Sprint(err)
					}
					return ss.GetTime().AsTime().After(at) && ss.GetSessionInfo().GetState() == "idle", ss.GetSessionInfo().GetState()
				})
			}

			waitFor(t, "the session in the API", func() (bool, string) {
				ss, err := stateOf(ctx, api, int(sessID))
				return err == nil && ss != nil, fmt.Sprint(err)
			})

			var statements []*numberedStatement
			// Short statements, each sent right after a snapshot and seen only
			// idle: numbered by the idle title right after them.
			for _, st := range []struct {
				name string
				run  func() error
			}{
				{"a simple query", func() error { _, err := conn.Exec(ctx, "SELECT count(*) FROM generate_series(1, 1000)"); return err }},
				{"an extended-protocol query", func() error { var n int; return conn.QueryRow(ctx, "SELECT $1::integer + 1", 1).Scan(&n) }},
				{"a utility statement", func() error { _, err := conn.Exec(ctx, "SET work_mem = '8MB'"); return err }},
				{"a statement that fails", func() error {
					_, err := conn.Exec(ctx, "SELECT 1 / (g - 1) FROM generate_series(1, 1) g")
					if err == nil {
						return errors.New("it did not fail")
					}
					return nil
				}},
			} {
				prev, err := stateOf(ctx, api, int(sessID))
				if err != nil || prev == nil {
					t.Fatalf("the session is not served: %v", err)
				}
				waitFor(t, "a new snapshot", func() (bool, string) {
					ss, err := stateOf(ctx, api, int(sessID))
					return err == nil && ss != nil && ss.GetTime().AsTime().After(prev.GetTime().AsTime()), fmt.Sprint(err)
				})
				ns := &numberedStatement{name: st.name, sent: time.Now()}
				if err := st.run(); err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				ns.done = time.Now()
				ns.ccnt = truth(isIdle)
				statements = append(statements, ns)
				snapshotAfter(ns.done, st.name)
			}
			// A statement several snapshots see running: numbered by its running title.
			long := &numberedStatement{name: "a statement of several snapshots", sent: time.Now()}
			ran := make(chan error, 1)
			go func() { _, err := conn.Exec(ctx, "SELECT pg_sleep(3)"); ran <- err }()
			long.ccnt = truth(func(a string) bool { return a == "SELECT" })
			if err := <-ran; err != nil {
				t.Fatal(err)
			}
			long.done = time.Now()
			statements = append(statements, long)
			snapshotAfter(long.done, long.name)
			if err := conn.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := awaitExit(ctx, pid); err != nil {
				t.Fatal(err)
			}

			// The events.
			var evs []events.FinishedQuery
			var present []bool
			waitFor(t, "the session's event", func() (bool, string) {
				evs, present = evs[:0], present[:0]
				ended := false
				for _, lr := range s.Sink.LogRecords() {
					switch lr.EventName() {
					case events.EventQueryEnd:
						q, err := pipelinetest.DecodeQueryEvent(lr.Attributes())
						if err == nil && q.Session.ID == sessID {
							_, has := lr.Attributes().Get(pipeline.AttrQueryCommandCount)
							evs, present = append(evs, q), append(present, has)
						}
					case events.EventSessionEnd:
						se, err := pipelinetest.DecodeSessionEvent(lr.Attributes())
						ended = ended || err == nil && se.Session.ID == sessID
					}
				}
				return ended, fmt.Sprintf("%d query events, no session event yet", len(evs))
			})
			eventOf := func(st *numberedStatement) (*events.FinishedQuery, bool) {
				var found []int
				for i, q := range evs {
					if start := time.Unix(0, q.Start); !start.Before(st.sent) && !start.After(st.done) {
						found = append(found, i)
					}
				}
				if len(found) != 1 {
					t.Errorf("%s: %d query events started while it ran, want 1", st.name, len(found))
					return nil, false
				}
				return &evs[found[0]], present[found[0]]
			}
			for _, st := range statements {
				q, has := eventOf(st)
				switch {
				case q == nil:
				case !greenplum && has:
					t.Errorf("%s: the event carries %s %d; PostgreSQL numbers no command", st.name, pipeline.AttrQueryCommandCount, q.CommandCount)
				case greenplum && q.CommandCount != st.ccnt:
					t.Errorf("%s: event ccnt %d, the title said cmd%d", st.name, q.CommandCount, st.ccnt)
				}
			}

			// The history rows.
			history := c.CoordinatorDSN
			hcfg, err := pgx.ParseConfig(history)
			if err != nil {
				t.Fatal(err)
			}
			hcfg.Database = "gpotel_history"
			hconn, err := pgx.ConnectConfig(ctx, hcfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = hconn.Close(context.Background()) })
			for _, st := range statements {
				var ccnt pgtype.Int8
				await.NoError(t, "the history row of "+st.name, func() error {
					return hconn.QueryRow(ctx, "SELECT ccnt FROM gpotel_history.queries WHERE sess_id = $1 AND query_start BETWEEN $2 AND $3",
						sessID, st.sent, st.done).Scan(&ccnt)
				})
				switch {
				case !greenplum && ccnt.Valid:
					t.Errorf("%s: history ccnt %d; PostgreSQL numbers no command, want NULL", st.name, ccnt.Int64)
				case greenplum && (!ccnt.Valid || ccnt.Int64 != st.ccnt):
					t.Errorf("%s: history ccnt %v, the title said cmd%d", st.name, ccnt, st.ccnt)
				}
			}
			if !greenplum {
				return
			}

			// yagpcc's GetGPQuery by {tmid, ssid, ccnt}, once the queries have
			// left the processor's longest window.
			time.Sleep(time.Until(long.done.Add(longestWindow + 2*interval)))
			for _, st := range statements {
				q, _ := eventOf(st)
				if q == nil {
					continue
				}
				key := &yagpcc.QueryKey{Tmid: int32(q.Session.TmID), Ssid: int32(sessID), Ccnt: int32(st.ccnt)} // #nosec G115 -- test ids
				resp, err := api.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: key})
				if err != nil {
					t.Errorf("%s: GetGPQuery %v: %v", st.name, key, err)
					continue
				}
				got := resp.GetQueriesData().GetQueryStat()
				if got.GetQueryKey().GetCcnt() != int32(st.ccnt) || !got.GetStartTime().AsTime().Equal(time.Unix(0, q.Start)) { // #nosec G115 -- test ids
					t.Errorf("%s: GetGPQuery %v answered key %v started %s, want the query started %s",
						st.name, key, got.GetQueryKey(), got.GetStartTime().AsTime(), time.Unix(0, q.Start))
				}
			}
		})
	}
}
