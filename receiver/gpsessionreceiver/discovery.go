// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/ownbackends"
)

// Backend is one database process, as the catalog lists it.
type Backend struct {
	SegmentID   int64
	PID         int64
	SessionID   int64
	BackendType string // empty where the server does not report it
}

// SessionRow is one coordinator pg_stat_activity row; nil means NULL or a
// column this server does not have.
type SessionRow struct {
	PID              int64
	SessionID        int64
	LeaderPID        *int64
	Datname          *string
	Usename          *string
	ApplicationName  *string
	ClientAddr       *string
	ClientHostname   *string
	ClientPort       *int64
	BackendStart     *time.Time
	XactStart        *time.Time
	QueryStart       *time.Time
	StateChange      *time.Time
	State            *string
	Waiting          *bool
	WaitingReason    *string
	WaitEventType    *string
	WaitEvent        *string
	BackendType      *string
	BackendXID       *string
	BackendXmin      *string
	RsgID            *int64
	RsgName          *string
	RsgQueueDuration *string
	Query            *string
	// Own is true for a backend of the receiver's own monitoring pool or
	// of another of the collector's connections to the same server (the
	// exporter's action connection), known by its pid (not a column:
	// nothing a database user can set).
	Own bool
}

// ClusterState is what one discovery read from the coordinator.
type ClusterState struct {
	Dialect  dialect.Dialect
	TmID     int64
	Backends []Backend
	Sessions []SessionRow // every coordinator row; sessionHeads picks the sessions
	// ResourceGroups names resource group oids (pg_resgroup); nil when the
	// server has none or the query failed (ResourceGroupsErr says why).
	ResourceGroups    map[uint32]string
	ResourceGroupsErr error
	// ResourceQueues names the resource queue of each session's role
	// (pg_roles.rolresqueue), by role name; nil where the server has no
	// queues or the query failed (ResourceQueuesErr says why; a partial
	// map holds the roles read before the failure).
	ResourceQueues    map[string]string
	ResourceQueuesErr error
}

// clusterSource is what a scrape needs from the database.
type clusterSource interface {
	Discover(ctx context.Context) (*ClusterState, error)
	// SegmentConfiguration reads gp_segment_configuration (Greenplum family only).
	SegmentConfiguration(ctx context.Context) ([]SegmentConfigRow, error)
	Close()
}

// pgSource reads the coordinator through a pgx pool. The pool connects
// lazily, so an unreachable database fails scrapes, never Start.
type pgSource struct {
	cfg *Config
	// tracer, when set, sees every statement the pool's connections send.
	tracer pgx.QueryTracer

	mu      sync.Mutex
	pool    *pgxpool.Pool
	own     ownbackends.Pool // the backends of pool's connections
	tmID    int64
	dialect dialect.Dialect // detected or configured; reset when tm_id changes
	columns map[string]bool // pg_stat_activity columns; reset when tm_id changes

	// backendsSeen is how many backends the last discovery returned: the
	// next one allocates for about as many at once instead of growing its
	// slice row by row, which shows in a large cluster's tick.
	backendsSeen atomic.Int64
}

func newPGSource(cfg *Config) *pgSource { return &pgSource{cfg: cfg} }

// connString joins the configured connection fields and TLS settings into
// one pgx connection string, keeping a URL a URL.
func connString(c *Config) (string, error) {
	tls := [][2]string{{"sslmode", c.SSLMode}, {"sslrootcert", c.SSLRootCert}, {"sslcert", c.SSLCert}, {"sslkey", c.SSLKey}}
	dsn := string(c.DSN)
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", errors.New("dsn: not a valid URL")
		}
		q := u.Query()
		for _, kv := range tls {
			if kv[1] != "" {
				q.Set(kv[0], kv[1])
			}
		}
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	var kv []string
	add := func(k, v string) {
		if v != "" {
			kv = append(kv, k+"="+quoteConnValue(v))
		}
	}
	if dsn == "" {
		add("host", c.Host)
		if c.Port != 0 {
			add("port", strconv.Itoa(c.Port))
		}
		add("user", c.User)
		add("dbname", c.Database)
	} else {
		kv = append(kv, dsn)
	}
	for _, t := range tls {
		add(t[0], t[1])
	}
	return strings.Join(kv, " "), nil
}

// poolConfig builds the pgx configuration: connection fields, password
// source, TLS, application_name and statement_timeout.
func (s *pgSource) poolConfig() (*pgxpool.Config, error) {
	c := s.cfg
	cs, err := connString(c)
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(cs)
	if err != nil {
		return nil, fmt.Errorf("database connection settings: %w", err)
	}
	switch {
	case c.Password != "":
		pc.ConnConfig.Password = string(c.Password)
	case c.PasswordEnv != "":
		v, ok := os.LookupEnv(c.PasswordEnv)
		if !ok {
			return nil, fmt.Errorf("password_env: environment variable %s is not set", c.PasswordEnv)
		}
		pc.ConnConfig.Password = v
	case c.PasswordFile != "":
		b, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("password_file: %w", err)
		}
		pc.ConnConfig.Password = strings.TrimRight(string(b), "\r\n")
	}
	pc.ConnConfig.RuntimeParams["application_name"] = defaultApplicationName
	// Pinned, unless the dsn names a search_path itself (trusted config).
	if _, named := pc.ConnConfig.RuntimeParams["search_path"]; !named {
		pc.ConnConfig.RuntimeParams["search_path"] = gpsql.SearchPath
	}
	pc.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(c.StatementTimeout.Milliseconds(), 10)
	pc.ConnConfig.ConnectTimeout = c.StatementTimeout
	pc.MaxConns = 2
	pc.MinConns = 0
	pc.AfterConnect = bypassResourceGroups
	pc.ConnConfig.Tracer = s.tracer
	return pc, nil
}

func quoteConnValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// bypassResourceGroups keeps gpotel's catalog queries out of resource-group
// queues where the server has that setting (Greenplum with resource groups).
func bypassResourceGroups(ctx context.Context, conn *pgx.Conn) error {
	var has bool
	if err := conn.QueryRow(ctx, gpsql.HasResourceGroupBypass).Scan(&has); err != nil {
		return fmt.Errorf("query for gp_resource_group_bypass: %w", err)
	}
	if !has {
		return nil
	}
	if _, err := conn.Exec(ctx, gpsql.SetResourceGroupBypass); err != nil {
		return fmt.Errorf("%s: %w", gpsql.SetResourceGroupBypass, err)
	}
	return nil
}

func (s *pgSource) getPool() (*pgxpool.Pool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool != nil {
		return s.pool, nil
	}
	pc, err := s.poolConfig()
	if err != nil {
		return nil, err
	}
	// Actions never touch these backends, whatever their application_name,
	// and their statements are no finished work of the cluster's.
	s.own.Track(pc, "monitoring connection")
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("database pool: %w", err)
	}
	s.pool = pool
	return pool, nil
}

// Close releases the pool's connections.
func (s *pgSource) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
}

// connectError is a failure to reach the coordinator at all: retrying at
// once would only wait for the same timeout again.
type connectError struct{ err error }

func (e *connectError) Error() string { return "connect to the coordinator: " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// Discover reads tm_id, the dialect, every backend and the coordinator's
// session rows. A failure not reported by the server (a dropped connection,
// as after a coordinator restart) is retried once on fresh connections.
func (s *pgSource) Discover(ctx context.Context) (*ClusterState, error) {
	pool, err := s.getPool()
	if err != nil {
		return nil, err
	}
	st, err := s.discover(ctx, pool)
	var pgErr *pgconn.PgError
	var connErr *connectError
	if err != nil && !errors.As(err, &pgErr) && !errors.As(err, &connErr) && ctx.Err() == nil {
		pool.Reset()
		st, err = s.discover(ctx, pool)
	}
	return st, err
}

func (s *pgSource) discover(ctx context.Context, pool *pgxpool.Pool) (*ClusterState, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, &connectError{err}
	}
	defer conn.Release()

	var tmID int64
	if err := conn.QueryRow(ctx, gpsql.PostmasterStart).Scan(&tmID); err != nil {
		return nil, fmt.Errorf("query tm_id (pg_postmaster_start_time): %w", err)
	}
	d, columns, err := s.serverShape(ctx, conn.Conn(), tmID)
	if err != nil {
		return nil, err
	}
	st := &ClusterState{Dialect: d, TmID: tmID}
	if st.Backends, err = queryBackends(ctx, conn.Conn(), gpsql.Backends(s.shape(d, columns)), int(s.backendsSeen.Load())); err != nil {
		return nil, err
	}
	s.backendsSeen.Store(int64(len(st.Backends)))
	if st.Sessions, err = querySessions(ctx, conn.Conn(), gpsql.Sessions(s.shape(d, columns)), d); err != nil {
		return nil, err
	}
	st.Backends = withCoordinatorRows(st.Backends, st.Sessions)
	for i := range st.Sessions {
		// The pool's backends, and the collector's other own connections
		// on this server (the exporter's action connection).
		pid := st.Sessions[i].PID
		st.Sessions[i].Own = s.own.Has(pid) || ownbackends.OnServer(tmID, pid)
	}
	if d.Greenplum() {
		// Names only label cgroup figures: a failure costs the names, not the scrape.
		st.ResourceGroups, st.ResourceGroupsErr = queryResourceGroups(ctx, conn.Conn())
		// Queues only scope rules: a failure leaves the sessions' queues unknown.
		st.ResourceQueues, st.ResourceQueuesErr = queryResourceQueues(ctx, conn.Conn())
	}
	return st, nil
}

// serverShape returns the dialect and the pg_stat_activity columns, read once
// per postmaster life (tm_id).
func (s *pgSource) serverShape(ctx context.Context, conn *pgx.Conn, tmID int64) (dialect.Dialect, map[string]bool, error) {
	s.mu.Lock()
	if s.tmID == tmID && s.dialect != "" && s.columns != nil {
		d, c := s.dialect, s.columns
		s.mu.Unlock()
		return d, c, nil
	}
	s.mu.Unlock()

	d := s.cfg.Dialect
	if d == dialect.Auto || d == "" {
		var version string
		if err := conn.QueryRow(ctx, gpsql.Version).Scan(&version); err != nil {
			return "", nil, fmt.Errorf("query version(): %w", err)
		}
		var err error
		if d, err = dialect.Detect(version); err != nil {
			return "", nil, err
		}
	}
	rows, err := conn.Query(ctx, gpsql.ActivityColumns)
	if err != nil {
		return "", nil, fmt.Errorf("query pg_stat_activity columns: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", nil, fmt.Errorf("query pg_stat_activity columns: %w", err)
	}
	columns := make(map[string]bool, len(names))
	for _, n := range names {
		columns[n] = true
	}
	if d.Greenplum() && !columns["sess_id"] {
		return "", nil, fmt.Errorf("dialect %s: pg_stat_activity has no sess_id column; is this really Greenplum?", d)
	}
	s.mu.Lock()
	s.tmID, s.dialect, s.columns = tmID, d, columns
	s.mu.Unlock()
	return d, columns, nil
}

// queryBackends reads every backend row; expect is how many are likely.
func queryBackends(ctx context.Context, conn *pgx.Conn, sql string, expect int) ([]Backend, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("query backends (gp_dist_random/pg_stat_activity): %w", err)
	}
	out := make([]Backend, 0, expect+expect/8)
	var b Backend
	backendType := internedText{seen: map[string]string{}}
	_, err = pgx.ForEachRow(rows, []any{&b.SegmentID, &b.PID, &b.SessionID, &backendType}, func() error {
		b.BackendType = backendType.v
		if b.SessionID < 0 {
			b.SessionID = 0
		}
		out = append(out, b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("query backends (gp_dist_random/pg_stat_activity): %w", err)
	}
	return out, nil
}

// internedText scans a text column (NULL as "") into one shared string per
// distinct value, so that rows repeating a few values (backend types) are
// read without an allocation each. It keeps at most maxInterned values.
type internedText struct {
	v    string
	seen map[string]string
}

const maxInterned = 64

func (t *internedText) ScanBytes(b []byte) error {
	if s, ok := t.seen[string(b)]; ok {
		t.v = s
		return nil
	}
	t.v = string(b)
	if len(t.seen) < maxInterned {
		t.seen[t.v] = t.v
	}
	return nil
}

// withCoordinatorRows adds the coordinator rows of the sessions' read that
// the backends' read, a moment before, missed (backends that connected in
// between): a session listed must have its backend asked about, or its
// exit record finds no listing and how it ended stays unknown.
func withCoordinatorRows(backends []Backend, sessions []SessionRow) []Backend {
	listed := make(map[int64]bool, len(sessions))
	for _, b := range backends {
		if b.SegmentID == coordinatorContent {
			listed[b.PID] = true
		}
	}
	for _, r := range sessions {
		if listed[r.PID] {
			continue
		}
		b := Backend{SegmentID: coordinatorContent, PID: r.PID, SessionID: r.SessionID}
		if r.BackendType != nil {
			b.BackendType = *r.BackendType
		}
		backends = append(backends, b)
	}
	return backends
}

func querySessions(ctx context.Context, conn *pgx.Conn, sql string, d dialect.Dialect) ([]SessionRow, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("query coordinator sessions (pg_stat_activity): %w", err)
	}
	var out []SessionRow
	for rows.Next() {
		var r SessionRow
		var sessID *int64
		if err := rows.Scan(&r.PID, &sessID, &r.LeaderPID, &r.Datname, &r.Usename, &r.ApplicationName,
			&r.ClientAddr, &r.ClientHostname, &r.ClientPort, &r.BackendStart, &r.XactStart, &r.QueryStart,
			&r.StateChange, &r.State, &r.Waiting, &r.WaitingReason, &r.WaitEventType, &r.WaitEvent,
			&r.BackendType, &r.BackendXID, &r.BackendXmin, &r.RsgID, &r.RsgName, &r.RsgQueueDuration, &r.Query); err != nil {
			rows.Close()
			return nil, fmt.Errorf("query coordinator sessions (pg_stat_activity): %w", err)
		}
		switch {
		case !d.Greenplum() && r.LeaderPID != nil:
			r.SessionID = *r.LeaderPID
		case !d.Greenplum():
			r.SessionID = r.PID
		case sessID != nil && *sessID > 0:
			r.SessionID = *sessID
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query coordinator sessions (pg_stat_activity): %w", err)
	}
	return out, nil
}

// shape is what the statements' texts depend on for this server.
func (s *pgSource) shape(d dialect.Dialect, columns map[string]bool) gpsql.Shape {
	return gpsql.Shape{Dialect: d, ActivityColumns: columns, QueryMaxLength: s.cfg.QueryMaxLength}
}

// SegmentConfiguration reads every gp_segment_configuration row.
func (s *pgSource) SegmentConfiguration(ctx context.Context) ([]SegmentConfigRow, error) {
	pool, err := s.getPool()
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, gpsql.SegmentConfiguration)
	if err != nil {
		return nil, fmt.Errorf("query gp_segment_configuration: %w", err)
	}
	var out []SegmentConfigRow
	var r SegmentConfigRow
	var host *string
	_, err = pgx.ForEachRow(rows, []any{&r.Content, &r.Role, &r.Status, &host}, func() error {
		r.Hostname = ""
		if host != nil {
			r.Hostname = *host
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("query gp_segment_configuration: %w", err)
	}
	return out, nil
}

// sessionHeads picks the rows that head a session: on Greenplum the
// coordinator backend of each sess_id (a client backend first, then the
// earliest started, then the lowest pid); on PostgreSQL every backend that is
// not a parallel worker. Greenplum rows without a sess_id are no session.
func sessionHeads(d dialect.Dialect, rows []SessionRow) []SessionRow {
	if !d.Greenplum() {
		out := make([]SessionRow, 0, len(rows))
		for _, r := range rows {
			if r.LeaderPID != nil && *r.LeaderPID != r.PID {
				continue
			}
			out = append(out, r)
		}
		return out
	}
	best := make(map[int64]int, len(rows))
	var order []int64
	for i, r := range rows {
		if r.SessionID <= 0 {
			continue
		}
		j, seen := best[r.SessionID]
		if !seen {
			best[r.SessionID] = i
			order = append(order, r.SessionID)
			continue
		}
		if headsBefore(r, rows[j]) {
			best[r.SessionID] = i
		}
	}
	out := make([]SessionRow, 0, len(order))
	for _, id := range order {
		out = append(out, rows[best[id]])
	}
	return out
}

func headsBefore(a, b SessionRow) bool {
	ac, bc := isClientBackend(a), isClientBackend(b)
	if ac != bc {
		return ac
	}
	if a.BackendStart != nil && b.BackendStart != nil && !a.BackendStart.Equal(*b.BackendStart) {
		return a.BackendStart.Before(*b.BackendStart)
	}
	return a.PID < b.PID
}

func isClientBackend(r SessionRow) bool {
	return r.BackendType == nil || *r.BackendType == "client backend"
}

// isSystemSession marks a session row that is a system process.
func isSystemSession(r SessionRow) bool {
	bt := ""
	if r.BackendType != nil {
		bt = *r.BackendType
	}
	return isSystemProcess(r.SessionID, bt)
}
