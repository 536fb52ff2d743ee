package memctx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	logCollector    bool
	logDestinations []string
	logLinePrefix   string
	hasLogFunction  bool
	hasRowsFunction bool
	currentUser     string
}

// RowsFunction is the function of the PostgreSQL 18 proposal (committed,
// then reverted): another backend's contexts as rows. Used when pg_proc has it.
const RowsFunction = "pg_get_process_memory_contexts"

// logFunction makes a backend write its contexts into the server log (PostgreSQL 14+).
const logFunction = "pg_log_backend_memory_contexts"

// Greenplum's options for a direct connection to a segment instance: GP7
// and Cloudberry spell it gp_role, GP6 gp_session_role.
var utilityOptions = []string{"", "-c gp_role=utility", "-c gp_session_role=utility"}

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
// retried in Greenplum's utility mode (GP7/Cloudberry spelling first).
func connect(ctx context.Context, procRoot string, in instance, user, database string) (*pgx.Conn, error) {
	host := socketDir(procRoot, in)
	if host == "" {
		host = "127.0.0.1"
		if in.listenAddr != "" && in.listenAddr != "*" && !strings.Contains(in.listenAddr, ",") {
			host = in.listenAddr
		}
	}
	var errs []error
	for _, opt := range utilityOptions {
		cfg, err := pgx.ParseConfig("")
		if err != nil {
			return nil, err
		}
		cfg.Host, cfg.Port, cfg.User, cfg.Database = host, uint16(in.port), user, database
		cfg.RuntimeParams["application_name"] = "gpotel-agent memory contexts"
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

// readSettings asks the server what it logs where and which functions it has.
func readSettings(ctx context.Context, conn *pgx.Conn) (serverSettings, error) {
	var s serverSettings
	var collector, dest string
	err := conn.QueryRow(ctx, `SELECT version(), current_setting('logging_collector'), current_setting('log_destination'),
		current_setting('log_line_prefix'), current_user::text,
		EXISTS (SELECT 1 FROM pg_catalog.pg_proc WHERE proname = $1),
		EXISTS (SELECT 1 FROM pg_catalog.pg_proc WHERE proname = $2)`, logFunction, RowsFunction).
		Scan(&s.version, &collector, &dest, &s.logLinePrefix, &s.currentUser, &s.hasLogFunction, &s.hasRowsFunction)
	if err != nil {
		return s, fmt.Errorf("reading the server's log settings: %w", err)
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

// chooseLog picks the format to read: the structured ones first, then
// stderr, and where that format's current file is.
func chooseLog(s serverSettings, in instance, procRoot string) (LogFormat, LogSource, error) {
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
	return nil, nil, fmt.Errorf("%w: log_destination = %q, logging_collector = %t; the agent reads jsonlog or csvlog (with logging_collector on) or stderr",
		errNoReadableLog, strings.Join(s.logDestinations, ","), s.logCollector)
}

// signalBackend runs pg_log_backend_memory_contexts(pid); false means the
// server does not know the pid as one of its processes.
func signalBackend(ctx context.Context, conn *pgx.Conn, pid int64) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_log_backend_memory_contexts($1::int)", pid).Scan(&ok)
	return ok, err
}

// isPermissionDenied: SQLSTATE 42501 insufficient_privilege.
func isPermissionDenied(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// queryRowsFunction reads another backend's contexts through the server's
// rows-returning function. Its path holds context ids (a context's own id
// last); they are turned into the ancestors' names.
func queryRowsFunction(ctx context.Context, conn *pgx.Conn, pid int64, summary bool, timeoutSeconds float64) ([]Context, error) {
	rows, err := conn.Query(ctx, `SELECT name, ident, type, level, path, total_bytes, total_nblocks,
		free_bytes, free_chunks, used_bytes, num_agg_contexts FROM pg_catalog.`+RowsFunction+`($1::int, $2, $3)`,
		pid, summary, timeoutSeconds)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Context
	var paths [][]int32
	names := map[int32]string{}
	for rows.Next() {
		var c Context
		var name, ident, typ *string
		var level, agg *int32
		var path []int32
		if err := rows.Scan(&name, &ident, &typ, &level, &path, &c.TotalBytes, &c.TotalBlocks,
			&c.FreeBytes, &c.FreeChunks, &c.UsedBytes, &agg); err != nil {
			return nil, err
		}
		c.Name, c.Ident, c.Type = deref(name), deref(ident), deref(typ)
		if level != nil {
			c.Level = int(*level)
		}
		if agg != nil && *agg > 1 {
			c.Aggregated = int(*agg)
		}
		if len(path) > 0 {
			names[path[len(path)-1]] = c.Name
		}
		out = append(out, c)
		paths = append(paths, path)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, path := range paths {
		for _, id := range path[:max(len(path)-1, 0)] {
			out[i].Path = append(out[i].Path, names[id])
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
