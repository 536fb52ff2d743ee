// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/groundtruth"
)

// cpuQuery burns CPU for d inside one statement.
func cpuQuery(d time.Duration) string {
	return fmt.Sprintf(`DO $$ BEGIN
  WHILE clock_timestamp() < statement_timestamp() + interval '%d milliseconds' LOOP
    PERFORM sum(sqrt(g::float8)) FROM generate_series(1, 20000) g;
  END LOOP;
END $$`, d.Milliseconds())
}

// ioQuery writes (and reads back) a temp table larger than temp_buffers for
// d inside one statement: the backend itself writes the evicted pages into
// the disk tablespace.
func ioQuery(d time.Duration) string {
	return fmt.Sprintf(`DO $$ BEGIN
  WHILE clock_timestamp() < statement_timestamp() + interval '%d milliseconds' LOOP
    TRUNCATE gpotel_query_io;
    INSERT INTO gpotel_query_io SELECT g, repeat(md5(g::text), 16) FROM generate_series(1, 20000) g;
    PERFORM count(*) FROM gpotel_query_io;
  END LOOP;
END $$`, d.Milliseconds())
}

// queryRun is one statement of the test's session and the truth around it.
type queryRun struct {
	name          string
	sql           string
	start         time.Time // the coordinator's query_start
	before, after groundtruth.Total
}

func (q *queryRun) cpu() float64 { return q.after.CPUSeconds() - q.before.CPUSeconds() }
func (q *queryRun) written() float64 {
	return float64(q.after.WriteBytes) - float64(q.before.WriteBytes)
}

// A session runs three statements back to back, each dispatched to the
// coordinator backend and one backend per segment as Greenplum would: CPU,
// then I/O, then CPU, each lasting several ticks. Each query's own figures
// (GetGPQuery: since it started, final once ended) match the kernel's
// counters read by the test right before and after it within 5 %, and the
// ended ones do not grow while the next runs. GetGPQuery is asked by
// query_start (gpotel's field 1001), which names a query whose key is its
// command count too.
func TestPerQueryFiguresMatchGroundTruth(t *testing.T) {
	needBinaries(t)
	c := cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 1, Dialect: dialect.GP6})
	ctx := await.Context(t)
	s := launch(ctx, t, c, StackOptions{
		Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(), OTLPKeep: 10,
		CollectorArgs: []string{
			"--set=receivers::gpsession::collection_interval=1s",
			"--set=receivers::gpsession::timeout=6s",
			"--set=receivers::gpsession::host_timeout=800ms",
			// The ended queries stay served for the longest window: the whole test.
			"--set=processors::snapshotdiff::windows=[10s,5m]",
		},
	})
	api := dialAPI(t, s.API)

	// The session: a coordinator backend, and a backend per segment tagged with its sess_id.
	open := func(dsn string, params map[string]string) *pgx.Conn {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range params {
			cfg.RuntimeParams[k] = v
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return conn
	}
	pidOf := func(conn *pgx.Conn) int {
		var pid int
		if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	coord := open(c.CoordinatorDSN, nil)
	// The coordinator's sess_id is its session counter's number, never its pid.
	var sessID int
	if err := coord.QueryRow(ctx, cluster.MySessIDSQL).Scan(&sessID); err != nil {
		t.Fatal(err)
	}
	conns := []*pgx.Conn{coord}
	for _, seg := range c.Segments {
		conns = append(conns, open(seg.DSN, map[string]string{"application_name": fmt.Sprintf("%s%d", cluster.SessionTagPrefix, sessID)}))
	}
	var pids []int
	for _, conn := range conns {
		pids = append(pids, pidOf(conn))
		for _, q := range []string{
			"SET temp_buffers = '800kB'",
			"SET temp_tablespaces = " + cluster.DiskTablespace,
			"CREATE TEMP TABLE gpotel_query_io (id integer, pad text)",
		} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	monitor := open(c.CoordinatorDSN, nil)
	waitFor(t, "the session in the API", func() (bool, string) {
		st, err := stateOf(ctx, api, sessID)
		return err == nil && st != nil, fmt.Sprint(err)
	})

	runs := []*queryRun{
		{name: "cpu 1", sql: cpuQuery(8 * time.Second)},
		{name: "io", sql: ioQuery(15 * time.Second)},
		{name: "cpu 2", sql: cpuQuery(8 * time.Second)},
	}
	// The ended query's figures while the next one runs, to compare with its final ones.
	midway := map[int]*yagpcc.QueryStat{}
	for i, r := range runs {
		var err error
		if r.before, err = groundtruth.Sum(pids); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		g, gctx := errgroup.WithContext(ctx)
		for _, conn := range conns {
			g.Go(func() error {
				_, err := conn.Exec(gctx, r.sql)
				return err
			})
		}
		// Its key: the coordinator backend's query_start, read while it runs.
		g.Go(func() error {
			return await.Poll(gctx, func() error {
				var state string
				var start time.Time
				if err := monitor.QueryRow(gctx, "SELECT state, query_start FROM pg_catalog.pg_stat_activity WHERE pid = $1", pids[0]).Scan(&state, &start); err != nil {
					return err
				}
				if state != "active" || (i > 0 && !start.After(runs[i-1].start)) {
					return fmt.Errorf("statement not started yet (state %s)", state)
				}
				r.start = start
				return nil
			})
		})
		if i > 0 {
			prev := runs[i-1]
			g.Go(func() error {
				// Two ticks into this query the previous one has had its last share.
				return await.Poll(gctx, func() error {
					data, err := queryData(gctx, api, sessID, prev.start)
					if err != nil {
						return err
					}
					qs := data.GetQueryStat()
					if qs.GetCollectTime().AsTime().Before(sent.Add(3 * time.Second)) {
						return fmt.Errorf("snapshot %v not yet 3 s into %s", qs.GetCollectTime().AsTime(), r.name)
					}
					midway[i-1] = qs
					return nil
				})
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if r.after, err = groundtruth.Sum(pids); err != nil {
			t.Fatal(err)
		}
	}

	// Final figures: the last query ended and a snapshot after it was taken.
	final := map[int]*yagpcc.TotalQueryData{}
	waitFor(t, "every query's final figures", func() (bool, string) {
		for i, r := range runs {
			data, err := queryData(ctx, api, sessID, r.start)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", r.name, err)
			}
			if !data.GetQueryStat().GetCompleted() {
				return false, r.name + " not completed yet"
			}
			final[i] = data
		}
		return true, ""
	})

	for i, r := range runs {
		st := final[i].GetQueryStat().GetTotalQueryMetrics().GetSystemStat()
		gotCPU, wantCPU := st.GetRunningTimeSeconds(), r.cpu()
		t.Logf("%s: CPU %.3f s (truth %.3f s, %+.2f %%), written %d B (truth %.0f B), read %d B, %d segment entries",
			r.name, gotCPU, wantCPU, 100*(gotCPU-wantCPU)/wantCPU, st.GetWriteBytes(), r.written(), st.GetReadBytes(), len(final[i].GetSegmentQueryMetrics()))
		if !within(gotCPU, wantCPU, 0.05) {
			t.Errorf("%s: CPU %.3f s, want %.3f s ± 5 %% (from /proc)", r.name, gotCPU, wantCPU)
		}
		// Per segment instance: the coordinator and both segments, adding up to the total.
		var segCPU float64
		var contents []int32
		for _, sm := range final[i].GetSegmentQueryMetrics() {
			segCPU += sm.GetSegmentMetrics().GetSystemStat().GetRunningTimeSeconds()
			contents = append(contents, sm.GetSegmentKey().GetSegindex())
		}
		if len(contents) != 3 || contents[0] != -1 || contents[1] != 0 || contents[2] != 1 || !within(segCPU, gotCPU, 0.001) {
			t.Errorf("%s: segment entries %v with %.3f s CPU, want -1, 0, 1 adding up to %.3f s", r.name, contents, segCPU, gotCPU)
		}
		if st.GetPartial() {
			// A host that missed a tick widens an interval; the figures must still match.
			t.Logf("%s: partial (a host did not answer in a snapshot it ran in)", r.name)
		}
		if mid := midway[i]; mid != nil {
			// A late host answer may still add its step to the boundary interval; a
			// leak of even one interval of the next query would be several times 2 %.
			if m := mid.GetTotalQueryMetrics().GetSystemStat(); !within(gotCPU, m.GetRunningTimeSeconds(), 0.02) ||
				!within(float64(st.GetWriteBytes()), float64(m.GetWriteBytes()), 0.02) {
				t.Errorf("%s grew after it ended: CPU %.3f s, written %d B while the next query ran, %.3f s, %d B at the end",
					r.name, m.GetRunningTimeSeconds(), m.GetWriteBytes(), gotCPU, st.GetWriteBytes())
			}
		}
	}
	io := runs[1]
	if got, want := float64(final[1].GetQueryStat().GetTotalQueryMetrics().GetSystemStat().GetWriteBytes()), io.written(); !within(got, want, 0.05) || want < 1<<20 {
		t.Errorf("io: written %.0f B, want %.0f B ± 5 %% (from /proc; at least 1 MiB)", got, want)
	}
	for _, i := range []int{0, 2} {
		if got := float64(final[i].GetQueryStat().GetTotalQueryMetrics().GetSystemStat().GetWriteBytes()); got > 0.05*io.written() {
			t.Errorf("%s: written %.0f B, more than 5 %% of the I/O query's %.0f B", runs[i].name, got, io.written())
		}
	}
}

// queryData asks GetGPQuery for the session's query that started at start.
func queryData(ctx context.Context, api yagpcc.GetGPInfoClient, sessID int, start time.Time) (*yagpcc.TotalQueryData, error) {
	st, err := stateOf(ctx, api, sessID)
	if err != nil || st == nil {
		return nil, fmt.Errorf("session %d not served: %v", sessID, err)
	}
	resp, err := api.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: &yagpcc.QueryKey{
		Tmid: int32(st.GetSessionKey().GetTmId()), Ssid: int32(sessID), QueryStart: timestamppb.New(start), // #nosec G115 -- test pids and tm_id
	}})
	if err != nil {
		return nil, err
	}
	return resp.GetQueriesData(), nil
}
