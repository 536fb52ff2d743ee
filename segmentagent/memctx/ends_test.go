// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/kernelunits"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/segmentagent/procfs"
)

// endsOf reads a whole log through format and keeps the statement ends.
func endsOf(t *testing.T, format LogFormat, b []byte) []*gpotelv1.StatementEnd {
	t.Helper()
	var out []*gpotelv1.StatementEnd
	for len(b) > 0 {
		entry, n := format.Next(b)
		if n == 0 {
			break
		}
		if r, ok := format.Parse(entry); ok {
			if e, ok := statementEndOf(r); ok {
				out = append(out, e)
			}
		}
		b = b[n:]
	}
	return out
}

// A real Greenplum 6 coordinator log: its FATAL and its two ERRORs are
// statement ends, with the session (con<N>), command count (cmd<M>: a
// statement that fails while it runs is logged one past its title's, a
// parse error at it), SQLSTATE and message; its LOG lines (a user's RAISE
// LOG included) are none.
func TestStatementEndsOfAGreenplumLog(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "gp6-coordinator.csv"))
	require.NoError(t, err)
	ends := endsOf(t, GreenplumCSVLog{}, b)
	require.Len(t, ends, 3)
	type end struct {
		pid, session, cmd int64
		severity, state   string
		message           string
	}
	var got []end
	for _, e := range ends {
		got = append(got, end{e.GetPid(), e.GetSessionId(), e.GetCommandCount(), e.GetSeverity(), e.GetSqlstate(), e.GetMessage()})
	}
	assert.Equal(t, []end{
		{20982, 0, 0, "FATAL", "57P03", "the database system is starting up"},
		{21205, 7, 3, "ERROR", "42703", `column "gp_segment_id" does not exist`},
		{21373, 9, 5, "ERROR", "22012", "division by zero"},
	}, got)
	e := ends[1]
	assert.Equal(t, time.Date(2026, 11, 24, 5, 43, 10, 704714000, time.UTC).UnixNano(), e.GetTimeUnixNano())
	assert.Equal(t, time.Date(2026, 11, 24, 5, 43, 10, 0, time.UTC).UnixNano(), e.GetSessionStartUnixNano())
}

// A segment's log holds its executors' errors: not the coordinator's.
func TestStatementEndsSkipASegmentsLines(t *testing.T) {
	line := `2026-11-24 05:43:10.704714 UTC,"gpadmin","postgres",p300,th-1,"10.0.0.1","4000",2026-11-24 05:43:10 UTC,0,con7,cmd4,seg0,slice1,,,sx1,"ERROR","22012","division by zero",,,,,,,0,,"int.c",1,` + "\n"
	assert.Empty(t, endsOf(t, GreenplumCSVLog{}, []byte(line)))
	coordinator := strings.Replace(line, ",seg0,", ",seg-1,", 1)
	assert.Len(t, endsOf(t, GreenplumCSVLog{}, []byte(coordinator)), 1)
}

// PostgreSQL's csvlog and jsonlog: the session start comes from session_id
// (hex start seconds . hex pid), the time in milliseconds.
func TestStatementEndsOfAPostgreSQLLog(t *testing.T) {
	csvLine := `2026-11-23 09:06:00.123 UTC,"u","db",19600,"[local]",6b0401f8.4c90,3,"SELECT",2026-11-23 09:06:00 UTC,3/2,0,ERROR,57014,"canceling statement due to statement timeout",,,,,,"select pg_sleep(10)",,,"psql","client backend",,0` + "\n"
	jsonLine := `{"timestamp":"2026-11-23 09:06:00.123 UTC","pid":19600,"session_id":"6b0401f8.4c90","error_severity":"FATAL","state_code":"57P01","message":"terminating connection due to administrator command","backend_type":"client backend"}` + "\n"
	for _, tc := range []struct {
		format LogFormat
		line   string
		want   string
	}{{CSVLog{}, csvLine, "57014"}, {JSONLog{}, jsonLine, "57P01"}} {
		ends := endsOf(t, tc.format, []byte(tc.line))
		require.Len(t, ends, 1, tc.format.Name())
		e := ends[0]
		assert.Equal(t, int64(19600), e.GetPid())
		assert.Zero(t, e.GetSessionId(), "PostgreSQL's session is its pid")
		assert.Equal(t, tc.want, e.GetSqlstate())
		assert.Equal(t, time.Unix(0x6b0401f8, 0).UnixNano(), e.GetSessionStartUnixNano())
		assert.Equal(t, time.Date(2026, 11, 23, 9, 6, 0, 123000000, time.UTC).UnixNano(), e.GetTimeUnixNano())
	}
	// A session id whose pid is another's names no session start.
	other := strings.Replace(csvLine, "6b0401f8.4c90", "6b0401f8.4c91", 1)
	assert.Zero(t, endsOf(t, CSVLog{}, []byte(other))[0].GetSessionStartUnixNano())
}

// A message a database user chose is cut at 512 bytes, never inside a
// character, and says so.
func TestStatementEndMessageIsBounded(t *testing.T) {
	long := strings.Repeat("ж", 2000)
	line := `2026-11-24 05:43:10.704714 UTC,"u","d",p21205,th-1,"[local]",,2026-11-24 05:43:10 UTC,0,con7,cmd3,seg-1,,,,sx1,"ERROR","P0001","` + long + `",,,,,,,0,,"pl_exec.c",1,` + "\n"
	ends := endsOf(t, GreenplumCSVLog{}, []byte(line))
	require.Len(t, ends, 1)
	m := ends[0].GetMessage()
	assert.LessOrEqual(t, len(m), maxEndMessage)
	assert.True(t, utf8.ValidString(m))
	assert.True(t, strings.HasSuffix(m, "…"))
}

// A record of a live process that is no backend of the instance, or whose
// session start is not the process's, is ignored and counted.
func TestRecordOfAnotherProcessIsIgnored(t *testing.T) {
	s, err := NewEndsService(Config{}, "/proc", hostKernel(t), nil)
	require.NoError(t, err)
	self := int64(os.Getpid())
	in := instance{postmasterPID: int64(os.Getppid())}
	r := Record{PID: self, Time: time.Now(), Severity: "ERROR", SQLState: "22012", Message: "division by zero"}
	assert.True(t, s.couldHaveWritten(in, r), "a child of the postmaster")
	assert.False(t, s.couldHaveWritten(instance{postmasterPID: 1}, r), "not the postmaster's child")
	r.SessionStart = time.Now().Add(-time.Hour)
	assert.False(t, s.couldHaveWritten(in, r), "a session start an hour before the process")
	s.take(instance{postmasterPID: 1}, Record{PID: self, Time: time.Now(), Severity: "ERROR", SQLState: "22012"})
	resp, err := s.GetStatementEnds(context.Background(), &gpotelv1.GetStatementEndsRequest{})
	require.NoError(t, err)
	assert.Empty(t, resp.GetRecords())
	assert.Equal(t, uint64(1), resp.GetIgnoredLines())
	assert.Zero(t, resp.GetReadThroughUnixNano(), "no log is read without data directories")
}

// The answer pages by cursor; a record dropped before the caller read it
// is counted as missed.
func TestStatementEndsAreServedByCursor(t *testing.T) {
	s, err := NewEndsService(Config{}, "/nonexistent", hostKernel(t), nil)
	require.NoError(t, err)
	for i := range maxEnds + 10 {
		s.take(instance{}, Record{PID: int64(1000 + i), Time: time.Now(), Severity: "ERROR", SQLState: "22012"})
	}
	ctx := context.Background()
	first, err := s.GetStatementEnds(ctx, &gpotelv1.GetStatementEndsRequest{})
	require.NoError(t, err)
	require.Len(t, first.GetRecords(), maxEndsPerAnswer)
	assert.True(t, first.GetMore())
	again, err := s.GetStatementEnds(ctx, &gpotelv1.GetStatementEndsRequest{Epoch: first.GetEpoch(), Cursor: 1})
	require.NoError(t, err)
	assert.Equal(t, uint64(10), again.GetMissed(), "the oldest 10 were dropped")
	next, err := s.GetStatementEnds(ctx, &gpotelv1.GetStatementEndsRequest{Epoch: first.GetEpoch(), Cursor: first.GetNextCursor()})
	require.NoError(t, err)
	assert.Equal(t, first.GetNextCursor(), next.GetRecords()[0].GetSequence())
}

func FuzzStatementEnd(f *testing.F) {
	addFixtureEntries(f, filepath.Join("testdata", "gp6-coordinator.csv"), GreenplumCSVLog{})
	addFixtureEntries(f, filepath.Join("testdata", "pg15.csv"), CSVLog{})
	addFixtureEntries(f, filepath.Join("testdata", "pg15.json"), JSONLog{})
	f.Fuzz(func(t *testing.T, entry []byte) {
		for _, format := range []LogFormat{GreenplumCSVLog{}, CSVLog{}, JSONLog{}} {
			r, ok := format.Parse(entry)
			if !ok {
				continue
			}
			e, ok := statementEndOf(r)
			if !ok {
				continue
			}
			if len(e.GetMessage()) > maxEndMessage || !utf8.ValidString(e.GetMessage()) && utf8.ValidString(r.Message) {
				t.Fatalf("message of %d bytes", len(e.GetMessage()))
			}
			if e.GetPid() <= 0 || e.GetTimeUnixNano() == 0 || len(e.GetSqlstate()) != 5 {
				t.Fatalf("end without identity: %v", e)
			}
		}
	})
}

// hostKernel is this host's boot time, and USER_HZ (100 on Linux).
func hostKernel(t *testing.T) kernelunits.Host {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	require.NoError(t, err)
	boot, err := procfs.ParseBootTime(b)
	require.NoError(t, err)
	return kernelunits.Host{ClkTck: 100, PageSize: 4096, BootTime: time.Unix(boot, 0)}
}

// gpLine is one line of Greenplum 6's CSV log with the fields a statement
// end reads, the others as the server leaves them for a client's backend.
func gpLine(ts string, pid int, con, cmd, seg, severity, state, msg string) string {
	return fmt.Sprintf(`2026-11-28 %s UTC,"gpadmin","exp",p%d,th-1242572416,"[local]",,2026-11-28 16:40:00 UTC,0,%s,%s,%s,,,,sx1,"%s","%s","%s",,,,,,,0,,"postgres.c",1,`,
		ts, pid, con, cmd, seg, severity, state, msg) + "\n"
}

// The endings a real Greenplum 6.24.3 logged (2026-11-28, docs/compatibility.md):
// each failure is a statement end with its con, cmd and SQLSTATE; the
// statement lines, the interrupt notes, the executors' 25M01 on the
// segments and the LOG of a session reset (a new con for the same pid) are none.
func TestStatementEndsOfRealGreenplumEndings(t *testing.T) {
	log := gpLine("16:43:41.778835", 18810, "con21", "cmd1", "seg-1", "LOG", "00000", "statement: SELECT t1.b FROM t t1") +
		gpLine("16:43:41.780055", 18810, "con21", "cmd1", "seg-1", "ERROR", "42703", "column t1.b does not exist") +
		gpLine("16:43:36.646210", 18667, "con20", "cmd2", "seg-1", "ERROR", "22012", "division by zero  (seg0 slice1 127.0.0.1:16000 pid=18672)") +
		gpLine("16:45:48.905080", 23184, "con50", "cmd2", "seg-1", "LOG", "00000", "Process interrupt for 'query cancel pending' (ic_udpifc.c:3836)") +
		gpLine("16:45:49.012215", 23184, "con50", "cmd2", "seg-1", "ERROR", "57014", "canceling statement due to user request") +
		gpLine("16:45:49.012215", 23190, "con50", "cmd2", "seg0", "ERROR", "25M01", "canceling MPP operation") +
		gpLine("16:45:53.769447", 23532, "con54", "cmd2", "seg-1", "ERROR", "57014", "canceling statement due to statement timeout") +
		gpLine("16:46:00.532411", 23758, "con60", "cmd2", "seg-1", "FATAL", "57P01", "terminating connection due to administrator command") +
		gpLine("16:46:00.539080", 23758, "con62", "", "seg-1", "LOG", "00000", "The previous session was reset because its gang was disconnected (session "+
			"id = 60). The new session id = 62") +
		gpLine("16:46:26.119705", 24655, "con64", "cmd2", "seg-1", "LOG", "08006", "could not send data to client: Connection reset by peer") +
		gpLine("16:46:26.119735", 24655, "con64", "cmd2", "seg-1", "FATAL", "08006", "connection to client lost")
	type end struct {
		session, cmd    int64
		severity, state string
	}
	var got []end
	for _, e := range endsOf(t, GreenplumCSVLog{}, []byte(log)) {
		got = append(got, end{e.GetSessionId(), e.GetCommandCount(), e.GetSeverity(), e.GetSqlstate()})
	}
	assert.Equal(t, []end{
		{21, 1, "ERROR", "42703"}, {20, 2, "ERROR", "22012"}, {50, 2, "ERROR", "57014"}, {54, 2, "ERROR", "57014"},
		{60, 2, "FATAL", "57P01"}, {64, 2, "LOG", "08006"}, {64, 2, "FATAL", "08006"},
	}, got)
}

// The log is followed from where it was first read, across a rotation: each
// call answers what was appended since, and the read-through time moves on.
func TestStatementEndsFollowTheLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gpdb.csv")
	before := gpLine("16:43:41.000000", 10, "con1", "cmd1", "seg-1", "ERROR", "22012", "before gpotel read the log")
	appendTo(t, path, before)
	s, err := NewEndsService(Config{DataDirectories: []string{dir}}, "/nonexistent", hostKernel(t), nil)
	require.NoError(t, err)
	tl, err := openTail(pathSource{path}, GreenplumCSVLog{}, "")
	require.NoError(t, err)
	tl.synced = true
	s.followers[dir] = &endsFollower{tail: tl}

	ctx := context.Background()
	first, err := s.GetStatementEnds(ctx, &gpotelv1.GetStatementEndsRequest{})
	require.NoError(t, err)
	assert.Empty(t, first.GetRecords(), "what the log held before it was first read")
	assert.NotZero(t, first.GetReadThroughUnixNano())

	appendTo(t, path, gpLine("16:43:42.000000", 11, "con2", "cmd2", "seg-1", "ERROR", "22012", "division by zero"))
	second, err := s.GetStatementEnds(ctx, &gpotelv1.GetStatementEndsRequest{Epoch: first.GetEpoch(), Cursor: first.GetNextCursor()})
	require.NoError(t, err)
	require.Len(t, second.GetRecords(), 1)
	assert.Equal(t, int64(2), second.GetRecords()[0].GetSessionId())
	assert.Greater(t, second.GetReadThroughUnixNano(), first.GetReadThroughUnixNano())

	// Rotated: the server writes a new file under the same name.
	require.NoError(t, os.Rename(path, path+".1"))
	appendTo(t, path, gpLine("16:43:43.000000", 12, "con3", "cmd5", "seg-1", "FATAL", "57P01", "terminating connection due to administrator command"))
	var got []*gpotelv1.StatementEnd
	next := second.GetNextCursor()
	await.Until(t, "the record of the new file", func() bool {
		resp, err := s.GetStatementEnds(ctx, &gpotelv1.GetStatementEndsRequest{Epoch: first.GetEpoch(), Cursor: next})
		require.NoError(t, err)
		got = append(got, resp.GetRecords()...)
		next = resp.GetNextCursor()
		return len(got) > 0
	})
	assert.Equal(t, "57P01", got[0].GetSqlstate())
}

// With no database_user the statement ends connect as the agent's OS user,
// as GetMemoryContexts does: an empty role is refused by every server
// (found live on Greenplum 6.24.3: "no PostgreSQL user name specified").
func TestStatementEndsConnectAsTheAgentsUserByDefault(t *testing.T) {
	me, err := user.Current()
	require.NoError(t, err)
	s, err := NewEndsService(Config{}, "/proc", hostKernel(t), nil)
	require.NoError(t, err)
	assert.Equal(t, me.Username, s.cfg.DatabaseUser)
	s, err = NewEndsService(Config{DatabaseUser: "gpmon"}, "/proc", hostKernel(t), nil)
	require.NoError(t, err)
	assert.Equal(t, "gpmon", s.cfg.DatabaseUser)
}
