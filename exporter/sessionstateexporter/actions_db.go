// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpotel/gpotel/internal/gpsql"
)

// signaller sends the action statements; actionDB is the real one.
type signaller interface {
	// cancel and terminate signal a coordinator backend; false: the server
	// found no such backend to signal. cancel with a start signals only
	// while the backend runs the query that started then (else errOtherQuery).
	cancel(ctx context.Context, pid int64, started time.Time) (bool, error)
	terminate(ctx context.Context, pid int64) (bool, error)
	// move moves a session to a resource group.
	move(ctx context.Context, sessID int64, group string) (bool, error)
}

var (
	// errOwnSession: the target is the action connection's own backend.
	errOwnSession = errors.New("it is the collector's own action connection")
	// errNoResourceGroups: the server's dialect has no resource groups.
	errNoResourceGroups = errors.New("the server has no resource groups")
	// errOtherQuery: the backend no longer runs the query that started then.
	errOtherQuery = errors.New("the server shows the backend running another query, or none, or cannot show the action role its query_start " +
		"(grant it pg_read_all_stats): nothing cancelled")
)

// actionDB is one connection to the coordinator with the action role,
// opened at the first action and again after a failure. Actions are rare
// and each is one short statement, so they take turns on it.
type actionDB struct {
	cfg ActionsConfig

	mu      sync.Mutex
	conn    *pgx.Conn
	dialect string
}

func newActionDB(cfg ActionsConfig) *actionDB { return &actionDB{cfg: cfg} }

// connConfig is the action connection's pgx settings, password included.
func (d *actionDB) connConfig() (*pgx.ConnConfig, error) {
	cc, err := pgx.ParseConfig(d.cfg.connString())
	if err != nil {
		return nil, fmt.Errorf("actions: connection settings: %w", err)
	}
	switch {
	case d.cfg.PasswordEnv != "":
		v, ok := os.LookupEnv(d.cfg.PasswordEnv)
		if !ok {
			return nil, fmt.Errorf("actions::password_env %s: the environment variable is not set", d.cfg.PasswordEnv)
		}
		cc.Password = v
	case d.cfg.PasswordFile != "":
		b, err := readSecretFile(d.cfg.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("actions::password_file %s: %w", d.cfg.PasswordFile, err)
		}
		cc.Password = b
	}
	cc.RuntimeParams["statement_timeout"] = strconv.FormatInt(d.cfg.StatementTimeout.Milliseconds(), 10)
	cc.ConnectTimeout = d.cfg.StatementTimeout
	return cc, nil
}

// run connects when needed and calls fn with the connection, its backend
// and the server's dialect. A failure that is not the server's answer
// drops the connection, so the next action connects afresh.
func (d *actionDB) run(ctx context.Context, fn func(ctx context.Context, conn *pgx.Conn, dialect string) error) error {
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
		if d.dialect, err = gpsql.DetectDialect(version); err != nil {
			_ = conn.Close(context.Background())
			return err
		}
		d.conn = conn
	}
	err := fn(ctx, d.conn, d.dialect)
	var pgErr *pgconn.PgError
	if err != nil && !errors.As(err, &pgErr) && !errors.Is(err, errOwnSession) && !errors.Is(err, errNoResourceGroups) && !errors.Is(err, errOtherQuery) {
		_ = d.conn.Close(context.Background())
		d.conn = nil
	}
	return err
}

// signal runs a statement that takes a backend pid (and more arguments)
// and answers a boolean.
func (d *actionDB) signal(ctx context.Context, sql string, pid int64, args ...any) (bool, error) {
	var done bool
	err := d.run(ctx, func(ctx context.Context, conn *pgx.Conn, _ string) error {
		if int64(conn.PgConn().PID()) == pid {
			return errOwnSession
		}
		return conn.QueryRow(ctx, sql, append([]any{pid}, args...)...).Scan(&done)
	})
	return done, err
}

func (d *actionDB) cancel(ctx context.Context, pid int64, started time.Time) (bool, error) {
	if started.IsZero() {
		return d.signal(ctx, gpsql.CancelQuery, pid)
	}
	done, err := d.signal(ctx, gpsql.CancelQueryStartedAt, pid, started)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, errOtherQuery
	}
	return done, err
}

func (d *actionDB) terminate(ctx context.Context, pid int64) (bool, error) {
	return d.signal(ctx, gpsql.TerminateSession, pid)
}

func (d *actionDB) move(ctx context.Context, sessID int64, group string) (bool, error) {
	var done bool
	err := d.run(ctx, func(ctx context.Context, conn *pgx.Conn, dialect string) error {
		sql := gpsql.MoveToResourceGroup(gpsql.Shape{Dialect: dialect})
		if sql == "" {
			return fmt.Errorf("%w (dialect %s)", errNoResourceGroups, dialect)
		}
		return conn.QueryRow(ctx, sql, sessID, group).Scan(&done)
	})
	return done, err
}

// close ends the connection.
func (d *actionDB) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn != nil {
		_ = d.conn.Close(context.Background())
		d.conn = nil
	}
}

// maxSecretBytes bounds what is read from a token or password file.
const maxSecretBytes = 8192

// readSecretFile reads a short secret, without its trailing newline.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path) // #nosec G304 -- the operator's configured file
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxSecretBytes {
		return "", fmt.Errorf("longer than %d bytes, not a secret", maxSecretBytes)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
