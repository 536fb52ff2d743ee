// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionaction

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/ownbackends"
)

// Signaller sends the action statements; the action connection is the
// real one, a test's fake another. Each acts on the backend b names only
// while the server still shows it under its pid (else ErrNoBackend,
// ErrOtherBackend or ErrBackendUnseen), and says whether the server did it.
type Signaller interface {
	// Cancel cancels the query b runs; with a start, only while it runs the
	// query that started then (else ErrOtherQuery).
	Cancel(ctx context.Context, b Backend, queryStart time.Time) (bool, error)
	Terminate(ctx context.Context, b Backend) (bool, error)
	// Move moves b's session to a resource group.
	Move(ctx context.Context, b Backend, group string) (bool, error)
}

// Backend names a session's coordinator backend as the snapshot saw it:
// a pid alone may by now be a later backend's.
type Backend struct {
	PID     int64
	Started time.Time // backend_start
	SessID  int64     // sess_id on the Greenplum family, the pid on PostgreSQL
}

var (
	// ErrOwnSession says the target is the action connection's own backend.
	ErrOwnSession = errors.New("it is the collector's own action connection")
	// ErrNoResourceGroups says the server's dialect has no resource groups.
	ErrNoResourceGroups = errors.New("the server has no resource groups")
	// ErrNoBackend says the server has no backend of the pid (the session ended).
	ErrNoBackend = errors.New("the server has no backend of this pid (the session ended?): nothing done")
	// ErrOtherBackend says the pid now names a later backend than the snapshot's.
	ErrOtherBackend = errors.New("the pid now names another backend than the snapshot's: nothing done")
	// ErrBackendUnseen says the action role may not see the backend's start.
	ErrBackendUnseen = errors.New("the server does not show the action role this backend's backend_start, so it cannot be told from a later backend " +
		"of the same pid (grant it pg_read_all_stats; on Greenplum 6 it must be a superuser): nothing done")
	// ErrOtherQuery says the backend no longer runs the query that started then.
	ErrOtherQuery = errors.New("the server shows the backend running another query, or none: nothing cancelled")
)

// actionConn is one connection to the coordinator with the action role,
// opened at the first action and again after a failure. Actions are rare
// and each is one short statement, so they take turns on it.
type actionConn struct {
	cfg Config

	mu      sync.Mutex
	conn    *pgx.Conn
	dialect dialect.Dialect
	// own is conn's backend, one of the collector's own: actions refuse
	// it, and the receiver marks its session as the collector's.
	own ownbackends.Pool
}

func newActionConn(cfg Config) *actionConn { return &actionConn{cfg: cfg} }

// connConfig is the action connection's pgx settings, password included.
func (d *actionConn) connConfig() (*pgx.ConnConfig, error) {
	cc, err := d.cfg.ConnConfig(gpsql.ActionsApplicationName)
	if err != nil {
		return nil, fmt.Errorf("actions::%w", err)
	}
	cc.RuntimeParams["statement_timeout"] = strconv.FormatInt(d.cfg.StatementTimeout.Milliseconds(), 10)
	cc.ConnectTimeout = d.cfg.StatementTimeout
	return cc, nil
}

// run connects when needed and calls fn with the connection, its backend
// and the server's dialect. A failure that is not the server's answer
// drops the connection, so the next action connects afresh.
func (d *actionConn) run(ctx context.Context, fn func(ctx context.Context, conn *pgx.Conn, server dialect.Dialect) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	// Connecting and the statement each within the timeout, should the
	// network stall where the server's statement_timeout cannot see.
	ctx, cancel := context.WithTimeout(ctx, 2*d.cfg.StatementTimeout)
	defer cancel()
	if d.conn == nil || d.conn.IsClosed() {
		cc, err := d.connConfig()
		if err != nil {
			return err
		}
		cctx, cancelConnect := context.WithTimeout(ctx, d.cfg.StatementTimeout)
		defer cancelConnect()
		conn, err := pgx.ConnectConfig(cctx, cc)
		if err != nil {
			return fmt.Errorf("connect as %s: %w", d.cfg.User, err)
		}
		var version string
		if err := conn.QueryRow(cctx, gpsql.Version).Scan(&version); err != nil {
			_ = conn.Close(context.Background())
			return fmt.Errorf("%s: %w", gpsql.Version, err)
		}
		if d.dialect, err = dialect.Detect(version); err != nil {
			_ = conn.Close(context.Background())
			return err
		}
		d.conn = conn
		if err := d.markOwn(cctx); err != nil {
			d.drop()
			return err
		}
	}
	err := fn(ctx, d.conn, d.dialect)
	var pgErr *pgconn.PgError
	if err != nil && !errors.As(err, &pgErr) && !isServersAnswer(err) {
		d.drop()
	}
	return err
}

// markOwn records the connection's backend as the collector's own, on
// its server (read by its tm_id, as the receiver reads it), so that the
// receiver marks its session gpotel.session.own while it is open.
func (d *actionConn) markOwn(ctx context.Context) error {
	return d.own.AddConnection(ctx, d.conn, "action connection")
}

// drop closes the connection; the next action connects afresh.
func (d *actionConn) drop() {
	d.own.Remove(int64(d.conn.PgConn().PID()))
	_ = d.conn.Close(context.Background())
	d.conn = nil
}

// act sends an action statement (gpsql's actOnBackend shape) on b, with
// its own further argument, and says what the server did.
func (d *actionConn) act(ctx context.Context, statement func(gpsql.Shape) string, b Backend, arg any) (bool, error) {
	var done bool
	err := d.run(ctx, func(ctx context.Context, conn *pgx.Conn, server dialect.Dialect) error {
		if int64(conn.PgConn().PID()) == b.PID {
			return ErrOwnSession
		}
		sql := statement(gpsql.Shape{Dialect: server})
		if sql == "" {
			return fmt.Errorf("%w (dialect %s)", ErrNoResourceGroups, server)
		}
		args := []any{b.PID, b.Started, b.SessID}
		if arg != nil {
			args = append(args, arg)
		}
		var started, queryStarted *time.Time
		var sessID *int64
		var answer *bool
		switch err := conn.QueryRow(ctx, sql, args...).Scan(&started, &sessID, &queryStarted, &answer); {
		case errors.Is(err, pgx.ErrNoRows):
			return ErrNoBackend
		case err != nil:
			return err
		case answer != nil:
			done = *answer
			return nil
		case started == nil:
			return ErrBackendUnseen
		case !started.Equal(b.Started) || sessID == nil || *sessID != b.SessID:
			return fmt.Errorf("%w (it started at %s, the snapshot's at %s)", ErrOtherBackend,
				started.UTC().Format(time.RFC3339Nano), b.Started.UTC().Format(time.RFC3339Nano))
		}
		return ErrOtherQuery
	})
	return done, err
}

func (d *actionConn) Cancel(ctx context.Context, b Backend, queryStart time.Time) (bool, error) {
	var start *time.Time
	if !queryStart.IsZero() {
		start = &queryStart
	}
	return d.act(ctx, gpsql.CancelQuery, b, start)
}

func (d *actionConn) Terminate(ctx context.Context, b Backend) (bool, error) {
	return d.act(ctx, gpsql.TerminateSession, b, nil)
}

func (d *actionConn) Move(ctx context.Context, b Backend, group string) (bool, error) {
	return d.act(ctx, gpsql.MoveToResourceGroup, b, group)
}

// isServersAnswer tells the refusals that are the server's answer, after
// which the connection stays good.
func isServersAnswer(err error) bool {
	for _, answer := range []error{ErrOwnSession, ErrNoResourceGroups, ErrNoBackend, ErrOtherBackend, ErrBackendUnseen, ErrOtherQuery} {
		if errors.Is(err, answer) {
			return true
		}
	}
	return false
}

// close ends the connection.
func (d *actionConn) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn != nil {
		d.drop()
	}
}
