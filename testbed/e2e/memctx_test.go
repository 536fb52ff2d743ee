// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/segmentagent"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/workload"
)

// needTestbed skips in -short mode: these tests start PostgreSQL clusters
// (in-process agents, no collector binary needed).
func needTestbed(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: runs PostgreSQL testbeds")
	}
}

// memctxAgent is an in-process gpotel-agent serving GetMemoryContexts for
// one emulated host's instances, and a client of it.
type memctxAgent struct {
	agent  *segmentagent.Agent
	client gpotelv1.MemoryContextsClient
}

// startMemctxAgent starts the agent of host with the testbed's defaults,
// changed by tweak; it stops at the end of the test.
func startMemctxAgent(t *testing.T, c *cluster.Cluster, host string, tweak func(*segmentagent.Config)) *memctxAgent {
	t.Helper()
	cfg := segmentagent.NewDefaultConfig()
	cfg.ListenAddress = "127.0.0.1:0"
	cfg.Hostname = host
	owner, err := instanceOwner(c.Coordinator.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AllowedUsers = []string{owner}
	cfg.LogLevel = "warn"
	for _, in := range c.Instances() {
		if in.Host == host {
			cfg.MemoryContexts.DataDirectories = append(cfg.MemoryContexts.DataDirectories, in.DataDir)
		}
	}
	cfg.MemoryContexts.DatabaseUser = cluster.AdminRole
	cfg.MemoryContexts.MinInterval = 0
	if tweak != nil {
		tweak(&cfg)
	}
	a, err := segmentagent.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		_ = a.Shutdown(sctx)
	})
	conn, err := grpc.NewClient(a.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &memctxAgent{agent: a, client: gpotelv1.NewMemoryContextsClient(conn)}
}

// memctxAnswer is the agent's answer to one GetMemoryContexts.
type memctxAnswer struct {
	resp *gpotelv1.GetMemoryContextsResponse
	err  error
}

// askInBackground asks for pid's contexts, waiting up to a minute, while the
// test goes on to act on the backend or the log.
func (a *memctxAgent) askInBackground(ctx context.Context, pid int) <-chan memctxAnswer {
	done := make(chan memctxAnswer, 1)
	go func() {
		resp, err := a.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(pid), Timeout: durationpb.New(time.Minute)})
		done <- memctxAnswer{resp, err}
	}()
	return done
}

// ownContext is one row of a backend's own pg_backend_memory_contexts.
type ownContext struct {
	name, parent string
	level        int // PostgreSQL 15: 0 is TopMemoryContext
	total        int64
}

// ownView reads pg_backend_memory_contexts on the backend itself, inside
// its open transaction beside the held cursor.
func ownView(ctx context.Context, s *workload.Session, content int) ([]ownContext, error) {
	var out []ownContext
	err := s.OnBackend(ctx, content, func(ctx context.Context, conn *pgx.Conn) error {
		out = out[:0]
		rows, err := conn.Query(ctx, "SELECT name, coalesce(parent, ''), level, total_bytes FROM pg_catalog.pg_backend_memory_contexts")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c ownContext
			if err := rows.Scan(&c.name, &c.parent, &c.level, &c.total); err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, err
}

// waitHeld waits until every backend of s holds what its kind holds (a
// sort, a lock, workfiles: workload.Session.Held).
func waitHeld(t *testing.T, s *workload.Session) {
	t.Helper()
	await.NoError(t, "the workload held on every backend", func() error {
		select {
		case <-s.Held():
			return nil
		case <-s.Done():
			t.Fatalf("workload ended before holding: %v", s.Wait())
		default:
		}
		return errors.New("not yet")
	})
}

func namesAtLevels12(rows []*gpotelv1.MemoryContext) map[string]bool {
	out := map[string]bool{}
	for _, r := range rows {
		if r.GetLevel() <= 2 && r.GetAggregatedContexts() == 0 {
			out[r.GetName()] = true
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// logLayouts are the server log layouts the agent reads, each on a server
// that writes it: Greenplum's CSV on the Greenplum 7 and Cloudberry
// dialects (Greenplum 6 has no pg_log_backend_memory_contexts), the other
// three on PostgreSQL.
var logLayouts = []cluster.Options{
	{Hosts: 1, SegmentsPerHost: 2, Dialect: dialect.GP7},
	{Hosts: 1, SegmentsPerHost: 2, Dialect: dialect.Cloudberry},
	{Dialect: dialect.PostgreSQL, LogDestination: cluster.LogStderr},
	{Dialect: dialect.PostgreSQL, LogDestination: cluster.LogCSV},
	{Dialect: dialect.PostgreSQL, LogDestination: cluster.LogJSON},
}

// layoutName names a test case after its dialect and log layout.
func layoutName(o cluster.Options) string {
	d := o.LogDestination
	if d == "" {
		d = cluster.DefaultLogDestination(o.Dialect)
	}
	return string(o.Dialect) + "-" + d
}

// TestMemoryContextsMatchTheBackendsOwnView: for every backend of a session
// that holds a large sort open, on each log layout, gpotel's contexts at
// levels 1-2 have the names the backend itself sees, and the totals of
// TopMemoryContext and of the largest context agree within 5 %.
func TestMemoryContextsMatchTheBackendsOwnView(t *testing.T) {
	needTestbed(t)
	for _, opts := range logLayouts {
		t.Run(layoutName(opts), func(t *testing.T) {
			c := cluster.Start(t, opts)
			agents := map[string]*memctxAgent{}
			for _, h := range c.Hosts {
				agents[h.Name] = startMemctxAgent(t, c, h.Name, nil)
			}
			ctx := await.Context(t)
			s, err := workload.Start(ctx, c, workload.Spec{Name: "held", Kind: workload.HeldSort, Duration: 3 * time.Minute, MemoryBytes: 16 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Stop() }()
			waitHeld(t, s)

			pids := s.Pids()
			contents := make([]int, 0, len(pids))
			for content := range pids {
				contents = append(contents, content)
			}
			sort.Ints(contents)
			for _, content := range contents {
				pid := pids[content][0]
				// The first read fills the caches the query needs; the second is the one compared.
				if _, err := ownView(ctx, s, content); err != nil {
					t.Fatal(err)
				}
				own, err := ownView(ctx, s, content)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := agents[c.HostOf(content)].client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(pid)})
				if err != nil {
					t.Fatalf("gpseg%d pid %d: %v", content, pid, err)
				}
				if resp.GetSource() != c.LogDestination {
					t.Errorf("gpseg%d: source %q, want %q", content, resp.GetSource(), c.LogDestination)
				}
				compareWithOwnView(t, content, pid, own, resp)
			}
		})
	}
}

func compareWithOwnView(t *testing.T, content, pid int, own []ownContext, resp *gpotelv1.GetMemoryContextsResponse) {
	t.Helper()
	ownNames := map[string]bool{}
	var ownTop, ownLarge ownContext
	for _, c := range own {
		if c.level <= 1 {
			ownNames[c.name] = true
		}
		if c.level == 0 {
			ownTop = c
		} else if c.total > ownLarge.total {
			ownLarge = c
		}
	}
	got := namesAtLevels12(resp.GetContexts())
	if fmt.Sprint(sortedKeys(got)) != fmt.Sprint(sortedKeys(ownNames)) {
		var missing, extra []string
		for n := range ownNames {
			if !got[n] {
				missing = append(missing, n)
			}
		}
		for n := range got {
			if !ownNames[n] {
				extra = append(extra, n)
			}
		}
		t.Errorf("gpseg%d pid %d: level 1-2 names differ from the backend's own view: missing %q, extra %q", content, pid, missing, extra)
	}
	var top, large *gpotelv1.MemoryContext
	for _, r := range resp.GetContexts() {
		if r.GetLevel() == 1 {
			top = r
		}
		path := r.GetPath()
		if r.GetName() == ownLarge.name && int(r.GetLevel()) == ownLarge.level+1 && len(path) > 0 && path[len(path)-1] == ownLarge.parent &&
			(large == nil || r.GetTotalBytes() > large.GetTotalBytes()) {
			large = r
		}
	}
	if top == nil || large == nil {
		t.Fatalf("gpseg%d pid %d: gpotel has no TopMemoryContext (%v) or no %q under %q (%v)", content, pid, top != nil, ownLarge.name, ownLarge.parent, large != nil)
	}
	t.Logf("gpseg%-2d pid %-7d %-28s gpotel %12d B   backend's own view %12d B", content, pid, "TopMemoryContext", top.GetTotalBytes(), ownTop.total)
	t.Logf("gpseg%-2d pid %-7d %-28s gpotel %12d B   backend's own view %12d B", content, pid, ownLarge.name+" (largest)", large.GetTotalBytes(), ownLarge.total)
	if !within(float64(top.GetTotalBytes()), float64(ownTop.total), 0.05) {
		t.Errorf("gpseg%d pid %d: TopMemoryContext %d B, the backend says %d B: more than 5 %% apart", content, pid, top.GetTotalBytes(), ownTop.total)
	}
	if !within(float64(large.GetTotalBytes()), float64(ownLarge.total), 0.05) {
		t.Errorf("gpseg%d pid %d: %s %d B, the backend says %d B: more than 5 %% apart", content, pid, ownLarge.name, large.GetTotalBytes(), ownLarge.total)
	}
	if ownLarge.total < 8<<20 {
		t.Errorf("gpseg%d pid %d: the largest context %s holds only %d B; the held sort should hold about 16 MiB", content, pid, ownLarge.name, ownLarge.total)
	}
	if resp.GetGrandTotal().GetTotalBytes() < top.GetTotalBytes()+large.GetTotalBytes() {
		t.Errorf("gpseg%d pid %d: grand total %d B is less than TopMemoryContext + the largest context", content, pid, resp.GetGrandTotal().GetTotalBytes())
	}
}

// codeOf is the gRPC code and message of err.
func codeOf(err error) (codes.Code, string) {
	st, _ := status.FromError(err)
	return st.Code(), st.Message()
}

// TestMemoryContextsRefusals: the cases where gpotel must say no, clearly.
func TestMemoryContextsRefusals(t *testing.T) {
	needTestbed(t)
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.Cloudberry})
	ctx := await.Context(t)
	s, err := workload.Start(ctx, c, workload.Spec{Name: "held", Kind: workload.HeldSort, Duration: 3 * time.Minute, MemoryBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop() }()
	waitHeld(t, s)
	pid := s.Pids()[0][0]
	host := c.HostOf(0)

	t.Run("no privilege gives PermissionDenied with the GRANT", func(t *testing.T) {
		a := startMemctxAgent(t, c, host, func(cfg *segmentagent.Config) { cfg.MemoryContexts.DatabaseUser = cluster.UserRole })
		_, err := a.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(pid)})
		code, msg := codeOf(err)
		if code != codes.PermissionDenied || !strings.Contains(msg, "GRANT EXECUTE ON FUNCTION pg_catalog.pg_log_backend_memory_contexts(integer) TO \""+cluster.UserRole+"\"") {
			t.Fatalf("got %v %q, want PermissionDenied with the GRANT", code, msg)
		}
		seg, _ := c.Instance(0)
		if err := execAs(ctx, seg.DSN, "GRANT EXECUTE ON FUNCTION pg_catalog.pg_log_backend_memory_contexts(integer) TO "+cluster.UserRole); err != nil {
			t.Fatal(err)
		}
		if _, err := a.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(pid)}); err != nil {
			t.Fatalf("after the GRANT: %v", err)
		}
	})
	t.Run("a process of another user is refused by the uid guard", func(t *testing.T) {
		a := startMemctxAgent(t, c, host, func(cfg *segmentagent.Config) { cfg.AllowedUsers = []string{"root"} })
		_, err := a.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(pid)})
		if code, msg := codeOf(err); code != codes.PermissionDenied || !strings.Contains(msg, "allowed_users") {
			t.Fatalf("got %v %q, want PermissionDenied by allowed_users", code, msg)
		}
	})
	a := startMemctxAgent(t, c, host, nil)
	t.Run("a pid of no instance of this host is NotFound", func(t *testing.T) {
		coordPID := s.Pids()[cluster.CoordinatorContent][0] // a backend of the coordinator, not of sdw1
		_, err := a.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(coordPID)})
		if code, msg := codeOf(err); code != codes.NotFound || !strings.Contains(msg, strconv.Itoa(coordPID)) {
			t.Fatalf("got %v %q, want NotFound naming pid %d", code, msg, coordPID)
		}
	})
	t.Run("an exited pid is NotFound", func(t *testing.T) {
		gone := exitedPID(t)
		_, err := a.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(gone)})
		if code, _ := codeOf(err); code != codes.NotFound {
			t.Fatalf("got %v, want NotFound", err)
		}
	})
	t.Run("a backend that never answers gives DeadlineExceeded naming it", func(t *testing.T) {
		stopped := stopProcess(t, pid)
		_, err := a.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(pid), Timeout: durationpb.New(time.Second)})
		stopped()
		code, msg := codeOf(err)
		if code != codes.DeadlineExceeded || !strings.Contains(msg, "pid "+strconv.Itoa(pid)) {
			t.Fatalf("got %v %q, want DeadlineExceeded naming pid %d", code, msg, pid)
		}
		// The next request starts from a fresh position: it gets one whole block.
		resp, err := a.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(pid)})
		if err != nil || len(resp.GetContexts()) == 0 || resp.GetContexts()[0].GetName() != "TopMemoryContext" {
			t.Fatalf("the request after a timeout: %v", err)
		}
	})
	t.Run("the same pid twice within min_interval is ResourceExhausted", func(t *testing.T) {
		limited := startMemctxAgent(t, c, host, func(cfg *segmentagent.Config) { cfg.MemoryContexts.MinInterval = time.Hour })
		if _, err := limited.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(pid)}); err != nil {
			t.Fatal(err)
		}
		_, err := limited.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(pid)})
		if code, msg := codeOf(err); code != codes.ResourceExhausted || !strings.Contains(msg, "min_interval") {
			t.Fatalf("got %v %q, want ResourceExhausted (min_interval)", code, msg)
		}
	})
	t.Run("a server with the rows-returning function is read from it, not from the log", func(t *testing.T) {
		seg, _ := c.Instance(0)
		if err := execAs(ctx, seg.DSN, rowsFunctionStandIn); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = execAs(context.Background(), seg.DSN, "DROP FUNCTION pg_catalog.pg_get_process_memory_contexts(integer, boolean, double precision)")
		}()
		resp, err := a.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(pid)})
		if err != nil {
			t.Fatal(err)
		}
		rows := resp.GetContexts()
		if resp.GetSource() != "pg_get_process_memory_contexts" || len(rows) != 3 || rows[2].GetName() != "index info" ||
			strings.Join(rows[2].GetPath(), "/") != "TopMemoryContext/CacheMemoryContext" || rows[2].GetType() != "AllocSet" ||
			rows[2].GetIdent() != "pg_class_oid_index" || rows[2].GetLevel() != 3 || rows[2].GetTotalBytes() != 2048 {
			t.Fatalf("source %q rows %v", resp.GetSource(), rows)
		}
	})
	t.Run("a backend that exits while the agent waits is NotFound", func(t *testing.T) {
		seg, _ := c.Instance(0)
		victim, err := pgx.Connect(ctx, seg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = victim.Close(context.Background()) }()
		vpid := int(victim.PgConn().PID())
		resumed := stopProcess(t, vpid)
		defer resumed()
		errc := make(chan error, 1)
		go func() {
			_, err := a.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(vpid), Timeout: durationpb.New(time.Minute)})
			errc <- err
		}()
		waitSignalPending(t, vpid, syscall.SIGUSR1)
		// SIGTERM is handled before the pending log request when the backend runs again.
		if err := execAs(ctx, seg.DSN, fmt.Sprintf("SELECT pg_terminate_backend(%d, 0)", vpid)); err != nil {
			t.Fatal(err)
		}
		waitSignalPending(t, vpid, syscall.SIGTERM)
		resumed()
		err = <-errc
		if code, msg := codeOf(err); code != codes.NotFound || !strings.Contains(msg, "exited") {
			t.Fatalf("got %v %q, want NotFound: exited", code, msg)
		}
	})
}

// rowsFunctionStandIn has the signature and columns of the PostgreSQL 18
// proposal's pg_get_process_memory_contexts (committed, then reverted: no
// released server has it) with fixed rows. It checks gpotel's detection and
// mapping (context-id paths to names, type), not any server's behaviour.
const rowsFunctionStandIn = `CREATE FUNCTION pg_catalog.pg_get_process_memory_contexts(pid integer, summary boolean, timeout double precision,
	OUT name text, OUT ident text, OUT type text, OUT level integer, OUT path integer[], OUT total_bytes bigint, OUT total_nblocks bigint,
	OUT free_bytes bigint, OUT free_chunks bigint, OUT used_bytes bigint, OUT num_agg_contexts integer, OUT stats_timestamp timestamptz)
	RETURNS SETOF record LANGUAGE sql AS $$
	VALUES ('TopMemoryContext', NULL, 'AllocSet', 1, '{1}'::int[], 100::bigint, 1::bigint, 10::bigint, 1::bigint, 90::bigint, 1, now()),
	       ('CacheMemoryContext', NULL, 'AllocSet', 2, '{1,2}', 1000, 2, 100, 2, 900, 1, now()),
	       ('index info', 'pg_class_oid_index', 'AllocSet', 3, '{1,2,3}', 2048, 2, 500, 1, 1548, 1, now())
	$$`

// TestMemoryContextsFollowLogRotation: the server rotates its log between
// the agent's signal and the backend's answer; the agent follows it into
// the new file.
func TestMemoryContextsFollowLogRotation(t *testing.T) {
	needTestbed(t)
	for _, opts := range []cluster.Options{
		{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.Cloudberry},
		{Dialect: dialect.PostgreSQL, LogDestination: cluster.LogJSON},
	} {
		t.Run(layoutName(opts), func(t *testing.T) {
			c := cluster.Start(t, opts)
			ctx := await.Context(t)
			in := c.Coordinator
			backend, err := pgx.Connect(ctx, in.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = backend.Close(context.Background()) }()
			pid := int(backend.PgConn().PID())
			a := startMemctxAgent(t, c, cluster.CoordinatorHost, nil)
			before := currentLog(t, c, in.DataDir)

			resumed := stopProcess(t, pid)
			defer resumed()
			done := a.askInBackground(ctx, pid)
			waitSignalPending(t, pid, syscall.SIGUSR1)
			// log_filename has one-second resolution: rotate into a new name.
			await.NoError(t, "the server rotating its log into a new file", func() error {
				if err := execAs(ctx, in.DSN, "SELECT pg_rotate_logfile()"); err != nil {
					return err
				}
				if currentLog(t, c, in.DataDir) == before {
					return errors.New("still " + before)
				}
				return nil
			})
			resumed()
			got := <-done
			if got.err != nil {
				t.Fatalf("after rotation: %v", got.err)
			}
			if n := len(got.resp.GetContexts()); n == 0 || got.resp.GetContexts()[0].GetName() != "TopMemoryContext" {
				t.Fatalf("after rotation: %d contexts, first %v", n, got.resp.GetContexts())
			}
			after := currentLog(t, c, in.DataDir)
			if b, err := os.ReadFile(after); err != nil || !strings.Contains(string(b), "Grand total") {
				t.Fatalf("the block should be in the new file %s (%v)", after, err)
			}
			t.Logf("rotated %s -> %s while pid %d was stopped; %d contexts read", filepath.Base(before), filepath.Base(after), pid, len(got.resp.GetContexts()))
		})
	}
}

// currentLog is the file the instance writes its log layout into: the one
// current_logfiles names for it, and for Greenplum's layout that csvlog
// file's converted twin (without its last .csv).
func currentLog(t *testing.T, c *cluster.Cluster, dataDir string) string {
	t.Helper()
	format := c.LogDestination
	if format == cluster.LogGreenplumCSV {
		format = cluster.LogCSV
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "current_logfiles"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f, p, ok := strings.Cut(line, " "); ok && f == format {
			path := filepath.Join(dataDir, p)
			if c.LogDestination == cluster.LogGreenplumCSV {
				path = strings.TrimSuffix(path, ".csv")
			}
			return path
		}
	}
	t.Fatalf("current_logfiles has no %s: %q", format, b)
	return ""
}

func execAs(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	_, err = conn.Exec(ctx, sql)
	return err
}

// stopProcess SIGSTOPs pid (a backend stuck where it checks no interrupt);
// the returned function resumes it, once.
func stopProcess(t *testing.T, pid int) func() {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", pid, err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	return resume
}

// waitSignalPending waits until sig is pending for the stopped pid
// (ShdPnd in /proc/<pid>/status): the agent has signalled it.
func waitSignalPending(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	await.NoError(t, fmt.Sprintf("signal %v pending for pid %d", sig, pid), func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "ShdPnd:"); ok {
				mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				if err == nil && mask&(1<<(uint(sig)-1)) != 0 {
					return nil
				}
				return fmt.Errorf("ShdPnd %s", strings.TrimSpace(v))
			}
		}
		return errors.New("no ShdPnd line")
	})
}

// exitedPID is the pid of a child that has exited and been reaped.
func exitedPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return p.Pid
}

// TestSessionMemoryContextsThroughTheCollector asks the running collector
// for a session's memory contexts: every backend on every host answers
// through its agent, the roll-up names the held sort's context with about
// one sort per backend, and a host whose agent is gone makes it partial.
func TestSessionMemoryContextsThroughTheCollector(t *testing.T) {
	needBinaries(t)
	c := cluster.Start(t, cluster.Options{Hosts: 2, SegmentsPerHost: 1, Dialect: dialect.Cloudberry})
	ctx := await.Context(t)
	s := launch(ctx, t, c, StackOptions{Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir()})
	const sortBytes = 16 << 20
	w, err := workload.Start(ctx, c, workload.Spec{Name: "held", Kind: workload.HeldSort, Duration: 3 * time.Minute, MemoryBytes: sortBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	waitHeld(t, w)

	conn, err := grpc.NewClient(s.API, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	api := gpotelv1.NewSessionMemoryContextsClient(conn)
	gpinfo := dialAPI(t, s.API)
	var key *sessionKey
	waitFor(t, "the held session in the API with all its backends", func() (bool, string) {
		st, err := stateOf(ctx, gpinfo, w.SessID())
		if err != nil || st == nil {
			return false, fmt.Sprint(err)
		}
		key = &sessionKey{st.GetSessionKey().GetTmId(), st.GetSessionKey().GetSessId()}
		return st.GetLastMetrics().GetSystemStat().GetProcesses() == uint32(len(w.AllPids())), fmt.Sprintf("%d processes", st.GetLastMetrics().GetSystemStat().GetProcesses())
	})
	resp, err := api.GetSessionMemoryContexts(ctx, key.request())
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetPartial() || len(resp.GetBackends()) != len(w.AllPids()) {
		t.Fatalf("partial %v, %d backends (want %d): %v", resp.GetPartial(), len(resp.GetBackends()), len(w.AllPids()), resp.GetBackends())
	}
	for _, b := range resp.GetBackends() {
		if b.GetError() != "" || len(b.GetContexts()) == 0 {
			t.Errorf("%s gpseg%d pid %d: error %q, %d contexts", b.GetHostname(), b.GetSegmentId(), b.GetPid(), b.GetError(), len(b.GetContexts()))
		}
	}
	top := resp.GetRollup()[0]
	t.Logf("roll-up: %s %d B in %d backends (top %v); grand total %d B", top.GetName(), top.GetTotalBytes(), top.GetBackends(), top.GetTopBackends(), resp.GetGrandTotalBytes())
	if int(top.GetBackends()) != len(w.AllPids()) || top.GetTotalBytes() < int64(len(w.AllPids()))*sortBytes*8/10 {
		t.Errorf("the largest context %s: %d B over %d backends; want the held sorts, about %d B over %d", top.GetName(), top.GetTotalBytes(),
			top.GetBackends(), len(w.AllPids())*sortBytes, len(w.AllPids()))
	}

	// Summary: levels 1-2 only, the sort counted inside its level-2 ancestor.
	// The agents answer a pid at most once per min_interval (2 s in the testbed stack).
	var sum *gpotelv1.GetSessionMemoryContextsResponse
	waitFor(t, "a complete summary", func() (bool, string) {
		sum, err = api.GetSessionMemoryContexts(ctx, key.summaryRequest())
		return err == nil && !sum.GetPartial(), fmt.Sprint(err, sum.GetBackends())
	})
	for _, b := range sum.GetBackends() {
		for _, ctx := range b.GetContexts() {
			if ctx.GetLevel() > 2 {
				t.Fatalf("summary has a level %d context %s", ctx.GetLevel(), ctx.GetName())
			}
		}
	}
	if sum.GetPartial() || sum.GetGrandTotalBytes() < int64(len(w.AllPids()))*sortBytes*8/10 {
		t.Errorf("summary: partial %v, grand total %d B", sum.GetPartial(), sum.GetGrandTotalBytes())
	}

	if err := s.KillAgent("sdw2"); err != nil {
		t.Fatal(err)
	}
	var partial *gpotelv1.GetSessionMemoryContextsResponse
	waitFor(t, "every backend outside sdw2 answering", func() (bool, string) {
		partial, err = api.GetSessionMemoryContexts(ctx, key.request())
		if err != nil {
			return false, err.Error()
		}
		for _, b := range partial.GetBackends() {
			if b.GetHostname() != "sdw2" && b.GetError() != "" {
				return false, b.GetError()
			}
		}
		return true, ""
	})
	failed := 0
	for _, b := range partial.GetBackends() {
		if b.GetHostname() == "sdw2" {
			if !strings.HasPrefix(b.GetError(), "Unavailable") {
				t.Errorf("sdw2 pid %d: error %q, want Unavailable", b.GetPid(), b.GetError())
			}
			failed++
		} else if b.GetError() != "" {
			t.Errorf("%s pid %d answered %q although its agent runs", b.GetHostname(), b.GetPid(), b.GetError())
		}
	}
	if !partial.GetPartial() || failed == 0 {
		t.Fatalf("with sdw2's agent gone: partial %v, %d sdw2 backends failed", partial.GetPartial(), failed)
	}
}

type sessionKey struct{ tmID, sessID int64 }

func (k *sessionKey) request() *gpotelv1.GetSessionMemoryContextsRequest {
	return &gpotelv1.GetSessionMemoryContextsRequest{SessionKey: &gpotelv1.SessionKey{TmId: k.tmID, SessId: k.sessID}}
}

func (k *sessionKey) summaryRequest() *gpotelv1.GetSessionMemoryContextsRequest {
	r := k.request()
	r.Summary = true
	return r
}

// TestMemoryContextsOnGreenplum6AreAFailedPrecondition: Greenplum 6 has no
// pg_log_backend_memory_contexts (checked on a real 6.24.3); the agent says
// so, naming the server's version, and sends the backend nothing.
func TestMemoryContextsOnGreenplum6AreAFailedPrecondition(t *testing.T) {
	needTestbed(t)
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP6})
	ctx := await.Context(t)
	seg, _ := c.Instance(0)
	backend, err := pgx.Connect(ctx, seg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = backend.Close(context.Background()) }()
	a := startMemctxAgent(t, c, c.HostOf(0), nil)
	_, err = a.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(backend.PgConn().PID())})
	code, msg := codeOf(err)
	if code != codes.FailedPrecondition || !strings.Contains(msg, "Greenplum Database 6") || !strings.Contains(msg, "pg_log_backend_memory_contexts") {
		t.Fatalf("got %v %q, want FailedPrecondition naming the version and the function", code, msg)
	}
}

// TestMemoryContextsOnGreenplum6PointToItsSessionMemory: Greenplum 6 has no
// way to show another backend's memory contexts; the agent answers
// FailedPrecondition and names the version's alternative, the per-session
// vmem view gpotel reads.
func TestMemoryContextsOnGreenplum6PointToItsSessionMemory(t *testing.T) {
	needTestbed(t)
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP6})
	agent := startMemctxAgent(t, c, c.HostOf(0), nil)
	ctx := await.Context(t)
	s, err := workload.Start(ctx, c, workload.Spec{Name: "held", Kind: workload.HeldSort, Duration: time.Minute, MemoryBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop() }()
	waitHeld(t, s)
	pid := s.Pids()[0][0]
	_, err = agent.client.GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: int64(pid)})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "session_state.session_level_memory_consumption") {
		t.Fatalf("GetMemoryContexts on Greenplum 6: %v, want FailedPrecondition naming session_state.session_level_memory_consumption", err)
	}
}
