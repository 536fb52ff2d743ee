// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/internal/pipeline/pipelinetest"
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
	{name: "completed", sql: "SELECT pg_sleep(2.5)", status: pipeline.QueryCompleted, session: pipeline.SessionClientDisconnect},
	// The division runs after the sleep: it fails at execution, not at planning.
	{name: "division by zero", sql: "SELECT 1/(count(*) - count(*)) FROM (SELECT pg_sleep(2.5)) s", status: pipeline.QueryError, sqlstate: "22012",
		session: pipeline.SessionClientDisconnect},
	{name: "cancelled", sql: sleepLonger, stop: "pg_cancel_backend", status: pipeline.QueryCancelled, sqlstate: "57014", reason: pipeline.CancelUserRequest,
		session: pipeline.SessionClientDisconnect},
	{name: "statement timeout", sql: sleepLonger, params: map[string]string{"statement_timeout": "2500"}, status: pipeline.QueryCancelled, sqlstate: "57014",
		reason: pipeline.CancelStatementTimeout, session: pipeline.SessionClientDisconnect},
	{name: "terminated", sql: sleepLonger, stop: "pg_terminate_backend", status: pipeline.QueryTerminated, sqlstate: "57P01", session: pipeline.SessionTerminated},
	// The client disconnects right after its statement, before the next snapshot.
	{name: "disconnect right after", sql: "SELECT pg_sleep(2.5)", status: pipeline.QueryCompleted, session: pipeline.SessionClientDisconnect},
}

// TestEveryWayAQueryEndsIsRecorded: one session for each way a statement
// ends; each query event says how, with the SQLSTATE where there is one
// and its end within a second of the server's, and each session event how
// the session ended (docs/pipeline.md, how it ended).
func TestEveryWayAQueryEndsIsRecorded(t *testing.T) {
	for _, opts := range cluster.SmallClusters(2) {
		if opts.Dialect != dialect.PostgreSQL && opts.Dialect != dialect.GP6 {
			continue
		}
		if opts.Dialect == dialect.PostgreSQL {
			opts.LogDestination = cluster.LogCSV // the statement ends need a structured log (stderr has no SQLSTATE)
		}
		t.Run(string(opts.Dialect), func(t *testing.T) {
			needBinaries(t)
			c := cluster.Start(t, opts)
			ctx := await.Context(t)
			s := launch(ctx, t, c, StackOptions{
				Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 50,
				CollectorArgs: []string{"--set=receivers::gpsession::collection_interval=1s"},
			})
			api := dialAPI(t, s.API)
			waitFor(t, "the collector's first snapshot", func() (bool, string) {
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
				waitFor(t, e.name+": the session in the API", func() (bool, string) {
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
					waitFor(t, "a snapshot of the idle session", func() (bool, string) {
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

			for _, r := range results {
				var q *pipeline.FinishedQuery
				var sess *pipeline.EndedSession
				waitFor(t, r.e.name+": the events", func() (bool, string) {
					for _, lr := range s.Sink.LogRecords() {
						switch lr.EventName() {
						case pipeline.EventQueryEnd:
							if ev, err := pipelinetest.DecodeQueryEvent(lr.Attributes()); err == nil && ev.Session.ID == r.sessID && ev.Start >= r.sent.Add(-time.Second).UnixNano() {
								q = &ev
							}
						case pipeline.EventSessionEnd:
							if ev, err := pipelinetest.DecodeSessionEvent(lr.Attributes()); err == nil && ev.Session.ID == r.sessID {
								sess = &ev
							}
						}
					}
					return q != nil && sess != nil, fmt.Sprintf("query event %v, session event %v", q != nil, sess != nil)
				})
				if q.Status != r.e.status || q.SQLState != r.e.sqlstate || q.CancelReason != r.e.reason {
					t.Errorf("%s: status %q sqlstate %q reason %q (%s), want %q %q %q", r.e.name, q.Status, q.SQLState, q.CancelReason, q.ErrorMessage,
						r.e.status, r.e.sqlstate, r.e.reason)
				}
				if end := time.Unix(0, q.End); end.Before(r.sent) || end.After(r.done.Add(time.Second)) {
					t.Errorf("%s: ended at %v; the server ended it between %v and %v", r.e.name, end, r.sent, r.done)
				}
				if sess.EndReason != r.e.session {
					t.Errorf("%s: the session ended %q (%s %s), want %q", r.e.name, sess.EndReason, sess.SQLState, sess.Message, r.e.session)
				}
			}
		})
	}
}
