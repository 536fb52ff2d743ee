// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// victoriaLogs is a VictoriaLogs server on loopback: bin/victoria-logs,
// which `make test` installs (Makefile, VICTORIALOGS_VERSION).
type victoriaLogs struct {
	addr string
	http http.Client
}

// startVictoriaLogs runs VictoriaLogs with its own data directory; it stops
// with the test.
func startVictoriaLogs(t *testing.T) *victoriaLogs {
	t.Helper()
	bin := filepath.Join(root, "bin", "victoria-logs")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("victoria-logs not found (make victoria-logs installs it; make test does): %v", err)
	}
	dir := t.TempDir()
	port, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	v := &victoriaLogs{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), http: http.Client{Timeout: 10 * time.Second}}
	proc, err := StartProcess("victoria-logs", filepath.Join(dir, "victoria-logs.log"), nil, bin,
		"-storageDataPath="+filepath.Join(dir, "data"), "-httpListenAddr="+v.addr, "-loggerLevel=WARN")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("victoria-logs log:\n%s", proc.LogTail(3000))
		}
		_ = proc.Stop(15 * time.Second)
	})
	waitFor(t, "victoria-logs ready", func() (bool, string) {
		if exited, err := proc.Exited(); exited {
			t.Fatalf("victoria-logs exited (%v): %s", err, proc.LogTail(3000))
		}
		resp, err := v.http.Get("http://" + v.addr + "/health")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return v
}

// maxLogStoreAnswer bounds what the test reads of one LogsQL answer.
const maxLogStoreAnswer = 1 << 20

// query runs a LogsQL query through /select/logsql/query: one log entry a
// line, every field a string.
func (v *victoriaLogs) query(ctx context.Context, logsQL string) ([]map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+v.addr+"/select/logsql/query",
		strings.NewReader(url.Values{"query": {logsQL}}.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := v.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body := io.LimitReader(resp.Body, maxLogStoreAnswer)
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(body)
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(text)))
	}
	var out []map[string]string
	lines := bufio.NewScanner(body)
	lines.Buffer(nil, maxLogStoreAnswer)
	for lines.Scan() {
		entry := map[string]string{}
		if err := json.Unmarshal(lines.Bytes(), &entry); err != nil {
			return nil, fmt.Errorf("answer line %q: %w", lines.Text(), err)
		}
		out = append(out, entry)
	}
	return out, lines.Err()
}

// finishedQueryLogsQL finds one finished query's event by its session and
// query_start (the history row's key on PostgreSQL, where ccnt is 0), as
// docs/operations.md prints it.
const finishedQueryLogsQL = `{event_name="gpotel.query.end"} gpotel.session.id:=%d gpotel.query.start:=%q` +
	` | math gpotel.cpu.time.user + gpotel.cpu.time.system as cpu_s` +
	` | fields _time, gpotel.query.status, gpotel.cpu.time.user, gpotel.cpu.time.system, cpu_s`

// The LogsQL the test runs is the one docs/operations.md shows, there with
// example values.
func TestLogStoreQueryIsDocumented(t *testing.T) {
	repo, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(finishedQueryLogsQL, 4242, "2026-11-28T17:02:03.123456Z"); !strings.Contains(string(doc), want) {
		t.Errorf("docs/operations.md does not show the query\n%s", want)
	}
}

// A statement's finished-query event, sent by the otlp_http exporter of
// config/victorialogs.yaml, is found in a real VictoriaLogs by LogsQL on
// its session and query_start, and its CPU is the history row's to the
// last bit (both keep the event's float64).
func TestFinishedQueryEventReachesALogStore(t *testing.T) {
	needBinaries(t)
	store := startVictoriaLogs(t)
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	ctx := await.Context(t)
	if err := c.CreateHistoryDatabase(ctx); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GPOTEL_VICTORIALOGS_ENDPOINT", store.addr)
	s := launch(ctx, t, c, StackOptions{
		Binaries: bins, Config: configPath("testbed.yaml"), Dir: t.TempDir(),
		CollectorArgs: []string{"--config", configPath("history.yaml"), "--config", configPath("victorialogs.yaml")},
	})
	api := dialAPI(t, s.API)

	conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	sessID := int(conn.PgConn().PID())
	// A statement that ended before gpotel first saw its session gets no event.
	waitFor(t, "the session in the API", func() (bool, string) {
		st, err := stateOf(ctx, api, sessID)
		return err == nil && st != nil, fmt.Sprint(err)
	})
	sent := time.Now()
	if _, err := conn.Exec(ctx, cpuQuery(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	done := time.Now()

	historyCfg, err := pgx.ParseConfig(c.CoordinatorDSN)
	if err != nil {
		t.Fatal(err)
	}
	historyCfg.Database = "gpotel_history"
	history, err := pgx.ConnectConfig(ctx, historyCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = history.Close(context.Background()) })
	var (
		queryStart   time.Time
		user, system float64
	)
	waitFor(t, "the statement's row in gpotel_history.queries", func() (bool, string) {
		err := history.QueryRow(ctx, `SELECT query_start, cpu_time_user, cpu_time_system FROM gpotel_history.queries
			WHERE sess_id = $1 AND query_start BETWEEN $2 AND $3`, sessID, sent, done).Scan(&queryStart, &user, &system)
		return err == nil, fmt.Sprint(err)
	})

	logsQL := fmt.Sprintf(finishedQueryLogsQL, sessID, events.TimeValue(queryStart.UnixNano()))
	var found []map[string]string
	waitFor(t, "the statement's event in VictoriaLogs", func() (bool, string) {
		var err error
		found, err = store.query(ctx, logsQL)
		return err == nil && len(found) > 0, fmt.Sprintf("%d entries, %v", len(found), err)
	})
	t.Logf("%s\n→ %v\nhistory row: query_start %s, cpu_time_user %v, cpu_time_system %v", logsQL, found, queryStart.UTC().Format(time.RFC3339Nano), user, system)
	if len(found) != 1 {
		t.Fatalf("%d entries for one statement, want 1", len(found))
	}
	event := found[0]
	for field, want := range map[string]float64{
		"gpotel.cpu.time.user":   user,
		"gpotel.cpu.time.system": system,
		"cpu_s":                  user + system,
	} {
		if got, err := strconv.ParseFloat(event[field], 64); err != nil || got != want {
			t.Errorf("%s in VictoriaLogs %q, history row %v", field, event[field], want)
		}
	}
	if user+system <= 0 {
		t.Errorf("the statement's CPU is %v s: nothing to compare", user+system)
	}
	if event["gpotel.query.status"] != events.QueryCompleted {
		t.Errorf("status %q, want %s", event["gpotel.query.status"], events.QueryCompleted)
	}
}
