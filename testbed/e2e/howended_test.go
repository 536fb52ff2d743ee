// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// anEnding is one way a statement ends, and what its events must say.
type anEnding struct {
	name     string
	sql      string
	params   map[string]string // startup parameters (PGOPTIONS)
	stop     string            // run by another session once a snapshot saw it run: pg_cancel_backend, pg_terminate_backend
	status   string
	sqlstate string
	reason   string // of a cancelled one
	session  string // how the session ended
}

// sleepLonger runs past a few snapshots: it is seen running.
const sleepLonger = "SELECT pg_sleep(30)"

var endings = []anEnding{
	{name: "completed", sql: "SELECT pg_sleep(2.5)", status: events.QueryCompleted, session: events.SessionClientDisconnect},
	// The division runs after the sleep: it fails at execution, not at planning.
	{name: "division by zero", sql: "SELECT 1/(count(*) - count(*)) FROM (SELECT pg_sleep(2.5)) s", status: events.QueryError, sqlstate: "22012",
		session: events.SessionClientDisconnect},
	{name: "cancelled", sql: sleepLonger, stop: "pg_cancel_backend", status: events.QueryCancelled, sqlstate: "57014", reason: events.CancelUserRequest,
		session: events.SessionClientDisconnect},
	{name: "statement timeout", sql: sleepLonger, params: map[string]string{"statement_timeout": "2500"}, status: events.QueryCancelled, sqlstate: "57014",
		reason: events.CancelStatementTimeout, session: events.SessionClientDisconnect},
	{name: "terminated", sql: sleepLonger, stop: "pg_terminate_backend", status: events.QueryTerminated, sqlstate: "57P01", session: events.SessionTerminated},
	// The client disconnects right after its statement, before the next snapshot.
	{name: "disconnect right after", sql: "SELECT pg_sleep(2.5)", status: events.QueryCompleted, session: events.SessionClientDisconnect},
}

// TestEveryWayAQueryEndsIsRecorded: one session for each way a statement
// ends; each query event says how, with the SQLSTATE where there is one
// and its end within a second of the server's, and each session event how
// the session ended (docs/pipeline.md, how it ended).
func TestEveryWayAQueryEndsIsRecorded(t *testing.T) {
	for _, opts := range cluster.SmallClusters(2) {
		if !opts.Dialect.Greenplum() {
			opts.LogDestination = cluster.LogCSV // the statement ends need a structured log (stderr has no SQLSTATE)
		}
		t.Run(string(opts.Dialect), func(t *testing.T) {
			needBinaries(t)
			c := cluster.Start(t, opts)
			ctx := await.Context(t)
			if err := c.CreateHistoryDatabase(ctx); err != nil {
				t.Fatal(err)
			}
			const interval, longestWindow = time.Second, 6 * time.Second
			s := launch(ctx, t, c, StackOptions{
				Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 50,
				CollectorArgs: []string{
					"--config=" + configPath("history.yaml"),
					"--set=receivers::gpsession::collection_interval=" + interval.String(),
					"--set=processors::snapshotdiff::windows=[3s," + longestWindow.String() + "]",
					"--set=exporters::sessionstate::last_metrics_window=3s",
				},
			})
			api := dialAPI(t, s.API)
			// A collector that died fails the test at once, not at the deadline.
			wait := func(what string, cond func() (bool, string)) {
				t.Helper()
				waitFor(t, what, func() (bool, string) {
					if exited, err := s.Collector.Exited(); exited {
						t.Fatalf("waiting for %s: the collector exited (%v): %s", what, err, s.Collector.LogTail(2000))
					}
					return cond()
				})
			}
			wait("the collector's first snapshot", func() (bool, string) {
				states, err := allSessions(ctx, api)
				return err == nil && len(states) > 0, fmt.Sprint(err)
			})
			monitor, err := pgx.Connect(ctx, c.CoordinatorDSN)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = monitor.Close(context.Background()) })

			type result struct {
				e          anEnding
				sessID     int64
				sent, done time.Time
			}
			results := make([]result, len(endings))
			for i, e := range endings {
				cfg, err := pgx.ParseConfig(c.CoordinatorDSN)
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range e.params {
					cfg.RuntimeParams[k] = v
				}
				conn, err := pgx.ConnectConfig(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				pid := int64(conn.PgConn().PID())
				sessID := pid
				if opts.Dialect.Greenplum() {
					if err := conn.QueryRow(ctx, "SELECT sess_id FROM pg_catalog.pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&sessID); err != nil {
						t.Fatal(err)
					}
					// The testbed's Greenplum log names a backend's con<N> from this tag (testbed/cluster/gplog.go).
					if _, err := conn.Exec(ctx, fmt.Sprintf("SET application_name = '%s%d'", cluster.SessionTagPrefix, sessID)); err != nil {
						t.Fatal(err)
					}
				}
				wait(e.name+": the session in the API", func() (bool, string) {
					st, err := stateOf(ctx, api, int(sessID))
					return err == nil && st != nil, fmt.Sprint(err)
				})
				r := result{e: e, sessID: sessID, sent: time.Now()}
				stopped := make(chan error, 1)
				if e.stop != "" {
					go func() {
						stopped <- await.Poll(ctx, func() error {
							st, err := stateOf(ctx, api, int(sessID))
							if err != nil || st.GetSessionInfo().GetState() != "active" || !st.GetTime().AsTime().After(r.sent.Add(1500*time.Millisecond)) {
								return fmt.Errorf("not seen running yet (%v)", err)
							}
							var ok bool
							if err := monitor.QueryRow(ctx, "SELECT "+e.stop+"($1)", pid).Scan(&ok); err != nil || !ok {
								return fmt.Errorf("%s: %v %v", e.stop, ok, err)
							}
							return nil
						})
					}()
				} else {
					stopped <- nil
				}
				_, qerr := conn.Exec(ctx, e.sql)
				r.done = time.Now()
				if err := <-stopped; err != nil {
					t.Fatal(err)
				}
				if (qerr != nil) != (e.sqlstate != "") {
					t.Fatalf("%s: the statement returned %v", e.name, qerr)
				}
				if e.name == "completed" {
					// Idle until a snapshot saw it idle, then leave.
					wait("a snapshot of the idle session", func() (bool, string) {
						st, err := stateOf(ctx, api, int(sessID))
						return err == nil && st != nil && st.GetSessionInfo().GetState() == "idle", fmt.Sprint(err)
					})
				}
				_ = conn.Close(ctx)
				if err := awaitExit(ctx, int(pid)); err != nil {
					t.Fatal(err)
				}
				results[i] = r
			}

			evs := make([]*events.FinishedQuery, len(results))
			for i, r := range results {
				var q *events.FinishedQuery
				var sess *events.EndedSession
				wait(r.e.name+": the events", func() (bool, string) {
					for _, lr := range s.Sink.LogRecords() {
						switch lr.EventName() {
						case events.EventQueryEnd:
							if ev, err := pipelinetest.DecodeQueryEvent(lr.Attributes()); err == nil && ev.Session.ID == r.sessID && ev.Start >= r.sent.Add(-time.Second).UnixNano() {
								q = &ev
							}
						case events.EventSessionEnd:
							if ev, err := pipelinetest.DecodeSessionEvent(lr.Attributes()); err == nil && ev.Session.ID == r.sessID {
								sess = &ev
							}
						}
					}
					return q != nil && sess != nil, fmt.Sprintf("query event %v, session event %v", q != nil, sess != nil)
				})
				evs[i] = q
				if q.Status != r.e.status || q.SQLState != r.e.sqlstate || q.CancelReason != r.e.reason {
					t.Errorf("%s: status %q sqlstate %q reason %q (%s), want %q %q %q", r.e.name, q.Status, q.SQLState, q.CancelReason, q.ErrorMessage,
						r.e.status, r.e.sqlstate, r.e.reason)
				}
				if end := time.Unix(0, q.End); end.Before(r.sent) || end.After(r.done.Add(time.Second)) {
					t.Errorf("%s: ended at %v; the server ended it between %v and %v", r.e.name, end, r.sent, r.done)
				}
				if greenplum := opts.Dialect.Greenplum(); greenplum != (q.CommandCount > 0) {
					t.Errorf("%s: the event's ccnt is %d on %s", r.e.name, q.CommandCount, opts.Dialect)
				}
				if sess.EndReason != r.e.session {
					t.Errorf("%s: the session ended %q (%s %s), want %q", r.e.name, sess.EndReason, sess.SQLState, sess.Message, r.e.session)
				}
			}

			// The history rows say the same as the events.
			hcfg, err := pgx.ParseConfig(c.CoordinatorDSN)
			if err != nil {
				t.Fatal(err)
			}
			hcfg.Database = "gpotel_history"
			history, err := pgx.ConnectConfig(ctx, hcfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = history.Close(context.Background()) })
			for i, r := range results {
				q := evs[i]
				var (
					status, endReason string
					sqlstate, reason  pgtype.Text
					ccnt              pgtype.Int8
					queryEnd          time.Time
				)
				wait(r.e.name+": its rows in gpotel_history", func() (bool, string) {
					err := history.QueryRow(ctx, `SELECT status, sqlstate, cancel_reason, query_end, ccnt FROM gpotel_history.queries
						WHERE tm_id = $1 AND sess_id = $2 AND query_start = $3`, q.Session.TmID, q.Session.ID, time.Unix(0, q.Start)).Scan(&status, &sqlstate, &reason, &queryEnd, &ccnt)
					if err == nil {
						err = history.QueryRow(ctx, "SELECT end_reason FROM gpotel_history.sessions WHERE tm_id = $1 AND sess_id = $2",
							q.Session.TmID, q.Session.ID).Scan(&endReason)
					}
					return err == nil, fmt.Sprint(err)
				})
				if status != r.e.status || sqlstate.String != r.e.sqlstate || reason.String != r.e.reason {
					t.Errorf("%s: history row status %q sqlstate %v cancel_reason %v, want %q %q %q", r.e.name, status, sqlstate, reason, r.e.status, r.e.sqlstate, r.e.reason)
				}
				if d := queryEnd.Sub(time.Unix(0, q.End)); d < -time.Microsecond || d > time.Microsecond {
					t.Errorf("%s: history query_end %v, the event's %v", r.e.name, queryEnd, time.Unix(0, q.End))
				}
				if ccnt.Valid != (q.CommandCount > 0) || ccnt.Int64 != q.CommandCount {
					t.Errorf("%s: history ccnt %v, the event's %d", r.e.name, ccnt, q.CommandCount)
				}
				if endReason != r.e.session {
					t.Errorf("%s: history session end_reason %q, want %q", r.e.name, endReason, r.e.session)
				}
			}

			// yagpcc's GetGPQuery, once the queries have left the processor's
			// longest window: by ccnt on Greenplum, by query_start on PostgreSQL.
			time.Sleep(time.Until(results[len(results)-1].done.Add(longestWindow + 2*interval)))
			for i, r := range results {
				q := evs[i]
				key := &yagpcc.QueryKey{Tmid: int32(q.Session.TmID), Ssid: int32(q.Session.ID), Ccnt: int32(q.CommandCount)} // #nosec G115 -- test ids
				if q.CommandCount == 0 {
					key.QueryStart = timestamppb.New(time.Unix(0, q.Start))
				}
				resp, err := api.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: key})
				if err != nil {
					t.Errorf("%s: GetGPQuery %v: %v", r.e.name, key, err)
					continue
				}
				got := resp.GetQueriesData().GetQueryStat()
				if want := yagpccStatusOf[r.e.status]; got.GetQueryStatus() != want {
					t.Errorf("%s: GetGPQuery answered %v, want %v", r.e.name, got.GetQueryStatus(), want)
				}
				if got.GetQueryKey().GetCcnt() != int32(q.CommandCount) || !got.GetQueryInfo().GetEndTime().AsTime().Equal(time.Unix(0, q.End)) { // #nosec G115 -- test ids
					t.Errorf("%s: GetGPQuery answered ccnt %d ended %v, the event's %d %v", r.e.name, got.GetQueryKey().GetCcnt(),
						got.GetQueryInfo().GetEndTime().AsTime(), q.CommandCount, time.Unix(0, q.End))
				}
			}
		})
	}
}

// yagpccStatusOf is yagpcc's QueryStatus of each status (docs/pipeline.md, how it ended).
var yagpccStatusOf = map[string]yagpcc.QueryStatus{
	events.QueryCompleted:  yagpcc.QueryStatus_QUERY_STATUS_DONE,
	events.QueryCancelled:  yagpcc.QueryStatus_QUERY_STATUS_CANCELED,
	events.QueryError:      yagpcc.QueryStatus_QUERY_STATUS_ERROR,
	events.QueryTerminated: yagpcc.QueryStatus_QUERY_STATUS_ERROR,
}
