// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/segmentagent/procfs"
)

// instance is one PostgreSQL server on this host, as its postmaster.pid says.
type instance struct {
	dataDir       string
	postmasterPID int64
	port          int
	socketDir     string // empty when the server has no Unix socket
	listenAddr    string
}

// readInstance reads <data dir>/postmaster.pid: pid, data dir, start time,
// port, socket directory, listen address, shared memory key, status.
func readInstance(dataDir string) (instance, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return instance{}, err
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return instance{}, fmt.Errorf("%s/postmaster.pid has %d lines, want at least 4", dataDir, len(lines))
	}
	pid, err := strconv.ParseInt(strings.TrimSpace(lines[0]), 10, 64)
	if err != nil {
		return instance{}, fmt.Errorf("%s/postmaster.pid: pid %q", dataDir, lines[0])
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil {
		return instance{}, fmt.Errorf("%s/postmaster.pid: port %q", dataDir, lines[3])
	}
	in := instance{dataDir: dataDir, postmasterPID: pid, port: port}
	if len(lines) > 4 {
		in.socketDir = strings.TrimSpace(lines[4])
	}
	if len(lines) > 5 {
		in.listenAddr = strings.TrimSpace(lines[5])
	}
	return in, nil
}

// serverSettings are what a request needs to know about the instance.
type serverSettings struct {
	version         string
	dialect         dialect.Dialect // from version(); "" for a server it does not name
	logCollector    bool
	logDestinations []string
	logLinePrefix   string
	hasLogFunction  bool
	hasRowsFunction bool
	currentUser     string
	// gpLogFormat is Greenplum's gp_log_format; empty where the server has none.
	gpLogFormat string
}

// connectModes are the startup options a connection to an instance tries
// in turn: none, then each dialect's utility mode (a direct connection to
// a Greenplum segment needs it, spelt differently by version).
var connectModes = func() []string {
	modes := []string{""}
	for _, d := range dialect.All {
		if m := d.Facts().UtilityMode; m != "" && !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	return modes
}()

// maxSocketPath is the longest path a Unix socket address holds (sun_path less its NUL).
const maxSocketPath = 107

// socketDir is where the instance's Unix socket is reached: through the
// postmaster's own root (<proc>/<pid>/root), which resolves in its mount
// namespace, so a private /tmp (the agent's unit has PrivateTmp=yes) does
// not hide /tmp/.s.PGSQL.<port>, the default on Greenplum and Cloudberry.
// The directory as named is the fallback: a postmaster of another uid
// (no access to its root) or a path too long for a socket address.
func socketDir(procRoot string, in instance) string {
	if !filepath.IsAbs(in.socketDir) {
		return in.socketDir
	}
	dir := filepath.Join(procRoot, strconv.FormatInt(in.postmasterPID, 10), "root", in.socketDir)
	sock := filepath.Join(dir, fmt.Sprintf(".s.PGSQL.%d", in.port))
	if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 && len(sock) <= maxSocketPath {
		return dir
	}
	return in.socketDir
}

// connect opens a local connection to the instance as the configured role:
// over its Unix socket when it has one, so peer authentication works
// without a password. A segment that refuses a normal connection is
// retried in Greenplum's utility mode.
func connect(ctx context.Context, procRoot string, in instance, user, database string) (*pgx.Conn, error) {
	host := socketDir(procRoot, in)
	if host == "" {
		host = "127.0.0.1"
		if in.listenAddr != "" && in.listenAddr != "*" && !strings.Contains(in.listenAddr, ",") {
			host = in.listenAddr
		}
	}
	var errs []error
	for _, opt := range connectModes {
		cfg, err := pgx.ParseConfig("")
		if err != nil {
			return nil, err
		}
		cfg.Host, cfg.Port, cfg.User, cfg.Database = host, uint16(in.port), user, database
		cfg.RuntimeParams["application_name"] = "gpotel-agent memory contexts"
		cfg.RuntimeParams["search_path"] = gpsql.SearchPath
		mode := "normal"
		if opt != "" {
			cfg.RuntimeParams["options"] = opt
			mode = opt
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", mode, err))
		// Only a refusal by the server (a Greenplum primary says "connections
		// to primary segments are not allowed") is worth another mode.
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			break
		}
	}
	return nil, fmt.Errorf("connecting to the instance in %s (port %d) as %q: %w", in.dataDir, in.port, user, errors.Join(errs...))
}

// readSettings asks the server what it logs where and which functions it
// has. Greenplum 6 lists gp_log_format in pg_settings, not log_destination.
func readSettings(ctx context.Context, conn *pgx.Conn) (serverSettings, error) {
	var s serverSettings
	var collector, dest string
	var gpLogFormat *string
	// server_version_num (nil) is not needed: the dialect says what differs.
	err := conn.QueryRow(ctx, gpsql.ServerLogSettings).
		Scan(&s.version, nil, &collector, &dest, &s.logLinePrefix, &s.currentUser, &gpLogFormat)
	if err != nil {
		return s, fmt.Errorf("reading the server's log settings: %w", err)
	}
	if err := conn.QueryRow(ctx, gpsql.HasLogFunction).Scan(&s.hasLogFunction); err != nil {
		return s, fmt.Errorf("looking for %s: %w", gpsql.LogFunction, err)
	}
	if err := conn.QueryRow(ctx, gpsql.HasContextsFunction).Scan(&s.hasRowsFunction); err != nil {
		return s, fmt.Errorf("looking for %s: %w", gpsql.ContextsFunction, err)
	}
	s.dialect, _ = dialect.Detect(s.version)
	if gpLogFormat != nil {
		s.gpLogFormat = strings.ToLower(*gpLogFormat)
	}
	s.logCollector = collector == "on"
	for _, d := range strings.Split(dest, ",") {
		if d = strings.TrimSpace(strings.ToLower(d)); d != "" {
			s.logDestinations = append(s.logDestinations, d)
		}
	}
	return s, nil
}

// errNoReadableLog: the server writes nothing the agent can read.
var errNoReadableLog = errors.New("no readable log destination")

// chooseLog picks the layout to read and where its current file is: on a
// Greenplum-family server with the logging collector, Greenplum's own CSV
// (log_destination is defunct there; gp_log_format=csv is the default);
// elsewhere jsonlog, then csvlog, then stderr.
func chooseLog(ctx context.Context, conn *pgx.Conn, s serverSettings, in instance, procRoot string) (LogFormat, LogSource, error) {
	has := func(d string) bool {
		for _, x := range s.logDestinations {
			if x == d {
				return true
			}
		}
		return false
	}
	if s.logCollector {
		if has("jsonlog") {
			return JSONLog{}, collectorLog{dataDir: in.dataDir, format: "jsonlog"}, nil
		}
		if s.dialect.Greenplum() && s.gpLogFormat != "text" {
			src, err := readGreenplumLog(ctx, conn, s, in)
			return GreenplumCSVLog{}, src, err
		}
		if has("csvlog") {
			return CSVLog{}, collectorLog{dataDir: in.dataDir, format: "csvlog"}, nil
		}
	}
	if has("stderr") {
		f, err := NewStderrLog(s.logLinePrefix)
		if err != nil {
			return nil, nil, err
		}
		if s.logCollector {
			return f, collectorLog{dataDir: in.dataDir, format: "stderr"}, nil
		}
		return f, postmasterStderr{procRoot: procRoot, postmasterPID: in.postmasterPID}, nil
	}
	return nil, nil, fmt.Errorf("%w: log_destination = %q, logging_collector = %t; the agent reads jsonlog or csvlog (with logging_collector on), "+
		"Greenplum's CSV log, or stderr",
		errNoReadableLog, strings.Join(s.logDestinations, ","), s.logCollector)
}

// readGreenplumLog reads where Greenplum's logging collector writes. A
// role that may not read log_directory gets the dialect's defaults.
func readGreenplumLog(ctx context.Context, conn *pgx.Conn, s serverSettings, in instance) (greenplumLog, error) {
	defaults := s.dialect.Facts().ServerLog
	dir, pattern := defaults.Directory, defaults.Filename
	var d, p string
	err := conn.QueryRow(ctx, gpsql.LogLocation).Scan(&d, &p)
	switch {
	case err == nil:
		dir, pattern = d, p
	case !isPermissionDenied(err):
		return greenplumLog{}, fmt.Errorf("reading log_directory and log_filename: %w", err)
	}
	name, err := greenplumLogName(pattern)
	if err != nil {
		return greenplumLog{}, err
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(in.dataDir, dir)
	}
	return greenplumLog{dataDir: in.dataDir, dir: dir, name: name}, nil
}

// newMark is a word no one can guess before the agent logs it.
func newMark() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making the log mark: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// markMessage is the message that carries mark, last.
func markMessage(pid int64, mark string) string {
	return fmt.Sprintf("gpotel-agent asks PID %d for its memory contexts after this mark: %s", pid, mark)
}

// logMark has the server log the mark at LOG, the level of the block itself,
// so it reaches the log exactly when the block would.
func logMark(ctx context.Context, conn *pgx.Conn, pid int64, mark string) error {
	_, err := conn.Exec(ctx, gpsql.LogMark(markMessage(pid, mark)))
	return err
}

// signalBackend runs pg_log_backend_memory_contexts(pid); false means the
// server does not know the pid as one of its processes.
func signalBackend(ctx context.Context, conn *pgx.Conn, pid int64) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, gpsql.SignalBackend, pid).Scan(&ok)
	return ok, err
}

// isPermissionDenied: SQLSTATE 42501 insufficient_privilege.
func isPermissionDenied(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// queryRowsFunction reads another backend's contexts through the server's
// rows-returning function. Its path holds context ids, a context's own id
// last; the one before is its parent's.
func queryRowsFunction(ctx context.Context, conn *pgx.Conn, pid int64, summary bool, timeoutSeconds float64) ([]Context, error) {
	rows, err := conn.Query(ctx, gpsql.ProcessMemoryContexts, pid, summary, timeoutSeconds)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Context
	type parentID struct {
		id  int32
		has bool
	}
	var parents []parentID
	index := map[int32]int{}
	for rows.Next() {
		if len(out) >= MaxContexts {
			return nil, fmt.Errorf("%w: more than %d memory contexts (MaxContexts)", errBeyondBounds, MaxContexts)
		}
		var c Context
		var name, ident, typ *string
		var level, agg *int32
		var path []int32
		if err := rows.Scan(&name, &ident, &typ, &level, &path, &c.TotalBytes, &c.TotalBlocks,
			&c.FreeBytes, &c.FreeChunks, &c.UsedBytes, &agg); err != nil {
			return nil, err
		}
		c.Name, c.Ident, c.Type, c.Parent = deref(name), deref(ident), deref(typ), -1
		if level != nil {
			c.Level = int(*level)
		}
		if agg != nil && *agg > 1 {
			c.Aggregated = int(*agg)
		}
		var parent parentID
		if n := len(path); n > 0 {
			index[path[n-1]] = len(out)
			if n > 1 {
				parent = parentID{path[n-2], true}
			}
		}
		out = append(out, c)
		parents = append(parents, parent)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, p := range parents {
		if at, ok := index[p.id]; ok && p.has {
			out[i].Parent = at
		}
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// processState is what the agent checks of a pid before and while it waits.
type processState struct {
	exists    bool
	ppid      int64
	uid       int64
	startTime int64 // clock ticks after boot: tells a reused pid apart
}

// readProcess reads the uid and parent from /proc/<pid>/status and the
// start time from stat, with the agent's own parsers.
func readProcess(procRoot string, pid int64) (processState, error) {
	dir := filepath.Join(procRoot, strconv.FormatInt(pid, 10))
	b, err := os.ReadFile(filepath.Join(dir, "status"))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return processState{}, nil
	}
	if err != nil {
		return processState{}, err
	}
	status, err := procfs.ParseStatus(b)
	if err != nil {
		return processState{}, fmt.Errorf("pid %d status: %w", pid, err)
	}
	b, err = os.ReadFile(filepath.Join(dir, "stat"))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return processState{}, nil
	}
	if err != nil {
		return processState{}, err
	}
	stat, err := procfs.ParseStat(b)
	if err != nil {
		return processState{}, fmt.Errorf("pid %d stat: %w", pid, err)
	}
	return processState{exists: true, ppid: status.PPid, uid: status.UIDReal, startTime: stat.StartTime}, nil
}
