// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/ownbackends"
)

const (
	// minPostgreSQL: indexes on partitioned tables came with 11.
	minPostgreSQL = 110000
	day           = 24 * time.Hour
)

// store is the exporter's connection to the history database and what it
// knows of the tables there. Only the writer goroutine uses it (and
// start, before the writer runs).
type store struct {
	cfg    *Config
	tables [tableCount]*historyTable
	now    func() time.Time
	tracer pgx.QueryTracer // tests record what is sent

	conn    *pgx.Conn
	dialect dialect.Dialect
	// own is conn's backend: written into the monitored cluster, the
	// history's own statements are the collector's (gpotel.session.own),
	// which give no finished-work events, so writing history makes none.
	own ownbackends.Pool
	// ready: the schema, tables, columns and staging tables were checked
	// on this connection.
	ready bool
	// days holds, per table, the UTC days that have a partition.
	days [tableCount]map[time.Time]bool
	// charset is what the database's encoding holds, learnt at connect.
	charset *charset
}

// rightError is a refusal the exporter cannot get past by waiting: a
// right the role lacks, a server too old, a column of another type.
type rightError struct{ msg string }

func (e *rightError) Error() string { return e.msg }

func refuse(format string, args ...any) error { return &rightError{fmt.Sprintf(format, args...)} }

// unreachable tells an error that may pass by itself (the server is down,
// starting, out of connections, or the network failed) from one that
// needs a person.
func unreachable(err error) bool {
	var re *rightError
	if errors.As(err, &re) {
		return false
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true
	}
	switch pgErr.Code[:2] {
	case "08", "53", "57", "58":
		return true
	}
	return false
}

// dataError: the server refused the rows themselves (SQLSTATE class 22),
// which writing them again will not change.
func dataError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22")
}

func newStore(cfg *Config) *store {
	return &store{cfg: cfg, tables: historyTables(cfg.Schema), now: time.Now}
}

func (s *store) close(ctx context.Context) {
	if s.conn != nil {
		s.own.Remove(int64(s.conn.PgConn().PID()))
		_ = s.conn.Close(ctx)
		s.conn = nil
	}
	s.ready = false
}

// open connects when needed and checks the schema once per connection.
func (s *store) open(ctx context.Context) error {
	if s.conn != nil && !s.conn.IsClosed() && s.ready {
		return nil
	}
	if s.conn == nil || s.conn.IsClosed() {
		s.close(ctx)
		cc, err := s.connConfig()
		if err != nil {
			return err
		}
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			return fmt.Errorf("connect to %s as %s: %w", s.cfg.Database, s.cfg.User, err)
		}
		s.conn = conn
		s.charset = charsetOf(conn.PgConn().ParameterStatus("server_encoding"))
		if err := s.own.AddConnection(ctx, conn, "history connection"); err != nil {
			s.close(ctx)
			return err
		}
	}
	if err := s.setup(ctx); err != nil {
		if unreachable(err) {
			s.close(ctx)
		}
		return err
	}
	s.ready = true
	return nil
}

func (s *store) connConfig() (*pgx.ConnConfig, error) {
	cc, err := s.cfg.ConnConfig(gpsql.HistoryApplicationName)
	if err != nil {
		return nil, refuse("%v", err)
	}
	// The rows are UTF-8: the server converts them to its encoding.
	cc.RuntimeParams["client_encoding"] = "UTF8"
	cc.RuntimeParams["statement_timeout"] = strconv.FormatInt(s.cfg.Timeout.Milliseconds(), 10)
	cc.ConnectTimeout = s.cfg.Timeout
	cc.Tracer = s.tracer
	return cc, nil
}

// write writes the batch in one transaction (writeTable per table). It
// returns the rows each table gained.
func (s *store) write(ctx context.Context, b *batch) (written [tableCount]int64, err error) {
	if err := s.open(ctx); err != nil {
		return written, err
	}
	defer func() {
		if err != nil {
			s.forget(ctx, err)
		}
	}()
	for i := range b.tables {
		for d := range b.tables[i].days {
			if err := s.ensurePartition(ctx, i, d); err != nil {
				return written, err
			}
		}
	}
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		return written, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	for i := range b.tables {
		if b.tables[i].rows == 0 {
			continue
		}
		if written[i], err = s.writeTable(ctx, tx, &b.tables[i]); err != nil {
			return written, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return [tableCount]int64{}, fmt.Errorf("commit: %w", err)
	}
	return written, nil
}

// writeTable writes one table's rows of a batch in transaction tx. A
// batch's keys were written before only if the table holds a row ending
// within the batch's end times: the usual batch, newer than every row,
// is copied straight into the table; else its rows are staged and
// inserted where their key is not already (the look-up reads the rows
// ending in that range).
func (s *store) writeTable(ctx context.Context, tx pgx.Tx, tr *tableRows) (int64, error) {
	var held bool
	if err := tx.QueryRow(ctx, gpsql.HistoryRowsEndBetween(tr.t.HistoryTable), tr.minEnd, tr.maxEnd).Scan(&held); err != nil {
		return 0, fmt.Errorf("look for rows of %s ending from %s to %s: %w", tr.t.Name, tr.minEnd.Format(time.RFC3339), tr.maxEnd.Format(time.RFC3339), err)
	}
	copyInto, into := gpsql.CopyHistoryRows, tr.t.Name
	if held {
		copyInto, into = gpsql.CopyHistoryStage, "the staging table of "+tr.t.Name
	}
	var copied int64
	for _, part := range tr.parts {
		tag, err := s.conn.PgConn().CopyFrom(ctx, part.reader(), copyInto(tr.t.HistoryTable, part.columns))
		if err != nil {
			return 0, fmt.Errorf("copy %d rows into %s: %w", part.rows, into, err)
		}
		copied += tag.RowsAffected()
	}
	if !held {
		return copied, nil
	}
	tag, err := tx.Exec(ctx, gpsql.InsertHistoryRows(tr.t.HistoryTable), tr.minEnd, tr.maxEnd)
	if err != nil {
		return 0, fmt.Errorf("insert the staged rows into %s: %w", tr.t.Name, err)
	}
	return tag.RowsAffected(), nil
}

// forget drops what an error may have made stale: the connection when it
// broke, the checked schema when the server answered with an error
// (someone may have dropped a table or taken a right).
func (s *store) forget(ctx context.Context, err error) {
	if unreachable(err) || s.conn == nil || s.conn.IsClosed() {
		s.close(ctx)
		return
	}
	if !dataError(err) {
		s.ready = false
	}
}

// dropOldDays drops, per table, the partitions of every day whose last
// instant is older than the retention, never deleting a row. Today's
// partition is made first: Greenplum 6 will not drop a table's last one.
func (s *store) dropOldDays(ctx context.Context) (dropped [tableCount]int64, err error) {
	if s.cfg.Retention <= 0 {
		return dropped, nil
	}
	if err := s.open(ctx); err != nil {
		return dropped, err
	}
	defer func() {
		if err != nil {
			s.forget(ctx, err)
		}
	}()
	now := s.now()
	cutoff := now.Add(-s.cfg.Retention)
	for i, t := range s.tables {
		days, err := s.partitionDays(ctx, t)
		if err != nil {
			return dropped, err
		}
		s.days[i] = days
		if err := s.ensurePartition(ctx, i, now.UTC().Truncate(day)); err != nil {
			return dropped, err
		}
		for _, d := range slices.SortedFunc(maps.Keys(s.days[i]), time.Time.Compare) {
			if d.Add(day).After(cutoff) {
				break
			}
			if _, err := s.conn.Exec(ctx, gpsql.DropHistoryPartition(s.dialect, t.HistoryTable, d)); err != nil {
				return dropped, fmt.Errorf("drop the partition of %s from %s: %w", d.Format(time.DateOnly), t.Name, err)
			}
			delete(s.days[i], d)
			dropped[i]++
		}
	}
	return dropped, nil
}
