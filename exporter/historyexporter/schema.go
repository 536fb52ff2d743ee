// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/gpsql"
)

// setup learns the dialect, checks the role's rights, and makes what is
// missing: the schema, the tables with their indexes, new columns, and
// this session's staging tables.
func (s *store) setup(ctx context.Context) error {
	if err := s.learnDialect(ctx); err != nil {
		return err
	}
	var role, database string
	var superuser, createInDatabase, temporary bool
	var createInSchema, usage *bool
	if err := s.conn.QueryRow(ctx, gpsql.HistoryRights, s.cfg.Schema).Scan(&role, &superuser, &database, &createInDatabase, &temporary,
		&createInSchema, &usage); err != nil {
		return fmt.Errorf("read the role's rights: %w", err)
	}
	q := gpsql.QuoteIdent
	switch {
	case superuser:
		// A superuser (Greenplum 6's monitoring role is one) may do far
		// more than write history: the history gets a role of its own.
		return refuse("role %s is a superuser: give the history a role of its own: CREATE ROLE gpotel_history LOGIN; GRANT CREATE, TEMPORARY ON DATABASE "+
			"%s TO gpotel_history",
			q(role), q(database))
	case createInSchema == nil && !createInDatabase:
		return refuse("role %s may not create schema %s in database %s: GRANT CREATE ON DATABASE %s TO %s (or have its owner create it: CREATE SCHEMA %s "+
			"AUTHORIZATION %s)",
			q(role), q(s.cfg.Schema), q(database), q(database), q(role), q(s.cfg.Schema), q(role))
	case createInSchema != nil && (!*createInSchema || !*usage):
		return refuse("role %s may not create tables in schema %s (partitions are tables): GRANT USAGE, CREATE ON SCHEMA %s TO %s",
			q(role), q(s.cfg.Schema), q(s.cfg.Schema), q(role))
	case !temporary:
		return refuse("role %s may not create temporary tables in database %s (each write is staged in one): GRANT TEMPORARY ON DATABASE %s TO %s",
			q(role), q(database), q(database), q(role))
	}
	if createInSchema == nil {
		if _, err := s.conn.Exec(ctx, gpsql.CreateHistorySchema(s.cfg.Schema)); err != nil {
			return fmt.Errorf("create schema %s: %w", s.cfg.Schema, err)
		}
	}
	for i, t := range s.tables {
		if err := s.setupTable(ctx, role, t); err != nil {
			return err
		}
		days, err := s.partitionDays(ctx, t)
		if err != nil {
			return err
		}
		s.days[i] = days
	}
	return nil
}

func (s *store) learnDialect(ctx context.Context) error {
	s.dialect = s.cfg.Dialect
	if s.dialect == dialect.Auto {
		var version string
		if err := s.conn.QueryRow(ctx, gpsql.Version).Scan(&version); err != nil {
			return fmt.Errorf("%s: %w", gpsql.Version, err)
		}
		d, err := dialect.Detect(version)
		if err != nil {
			return refuse("%v", err)
		}
		s.dialect = d
	}
	if s.dialect.Greenplum() {
		return nil
	}
	var num int
	if err := s.conn.QueryRow(ctx, gpsql.HistoryServerVersion).Scan(&num); err != nil {
		return fmt.Errorf("%s: %w", gpsql.HistoryServerVersion, err)
	}
	if num < minPostgreSQL {
		return refuse("PostgreSQL %d: the history tables need 11 or later (indexes on partitioned tables)", num)
	}
	return nil
}

// setupTable creates t with its indexes when it is missing, else checks
// that the role owns it (adding columns and partitions and dropping old
// days is the owner's right) and adds the columns it lacks.
func (s *store) setupTable(ctx context.Context, role string, t *historyTable) error {
	name := gpsql.QuoteIdent(t.Schema) + "." + gpsql.QuoteIdent(t.Name)
	var owner string
	var ownerRights bool
	err := s.conn.QueryRow(ctx, gpsql.HistoryRelationOwner, t.Schema, t.Name).Scan(&owner, &ownerRights)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := s.conn.Exec(ctx, gpsql.CreateHistoryTable(s.dialect, t.HistoryTable, s.now())); err != nil {
			return fmt.Errorf("create table %s: %w", name, err)
		}
	case err != nil:
		return fmt.Errorf("read the owner of %s: %w", name, err)
	case !ownerRights:
		return refuse("table %s belongs to %s, and role %s adds its columns and partitions and drops old days, which only the owner may: ALTER TABLE %s OWNER TO %s",
			name, gpsql.QuoteIdent(owner), gpsql.QuoteIdent(role), name, gpsql.QuoteIdent(role))
	}
	have, err := s.columns(ctx, t)
	if err != nil {
		return err
	}
	for _, c := range t.Columns {
		typ, ok := have[c.Name]
		switch {
		case !ok:
			if _, err := s.conn.Exec(ctx, gpsql.AddHistoryColumn(t.HistoryTable, c)); err != nil {
				return fmt.Errorf("add column %s to %s: %w", c.Name, name, err)
			}
		case typ != c.Type:
			return refuse("column %s of %s is %s; the events need %s (rename it, and the exporter adds the column anew)", c.Name, name, typ, c.Type)
		}
	}
	indexes := gpsql.HistoryIndexes(t.HistoryTable)
	for _, idx := range slices.Sorted(maps.Keys(indexes)) {
		var exists bool
		err := s.conn.QueryRow(ctx, gpsql.HistoryRelationOwner, t.Schema, idx).Scan(&owner, &exists)
		if errors.Is(err, pgx.ErrNoRows) {
			if _, err := s.conn.Exec(ctx, gpsql.CreateHistoryIndex(t.HistoryTable, idx, indexes[idx])); err != nil {
				return fmt.Errorf("create index %s on %s: %w", idx, name, err)
			}
		} else if err != nil {
			return fmt.Errorf("look for index %s: %w", idx, err)
		}
	}
	if _, err := s.conn.Exec(ctx, gpsql.CreateHistoryStage(s.dialect, t.HistoryTable)); err != nil {
		return fmt.Errorf("create the staging table of %s: %w", name, err)
	}
	return nil
}

func (s *store) columns(ctx context.Context, t *historyTable) (map[string]string, error) {
	rows, err := s.conn.Query(ctx, gpsql.HistoryTableColumns, t.Schema, t.Name)
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", t.Name, err)
	}
	have := map[string]string{}
	var name, typ string
	_, err = pgx.ForEachRow(rows, []any{&name, &typ}, func() error {
		have[name] = typ
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", t.Name, err)
	}
	return have, nil
}

// partitionDays reads the days t has a partition of. Partitions that are
// not named as the exporter names them (a DBA's own) are left alone.
func (s *store) partitionDays(ctx context.Context, t *historyTable) (map[time.Time]bool, error) {
	rows, err := s.conn.Query(ctx, gpsql.HistoryPartitions(s.dialect), t.Schema, t.Name)
	if err != nil {
		return nil, fmt.Errorf("list the partitions of %s: %w", t.Name, err)
	}
	days := map[time.Time]bool{}
	var name string
	_, err = pgx.ForEachRow(rows, []any{&name}, func() error {
		if d, ok := gpsql.HistoryPartitionDay(s.dialect, t.HistoryTable, name); ok {
			days[d] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the partitions of %s: %w", t.Name, err)
	}
	return days, nil
}

// ensurePartition adds the partition of a day t lacks. Greenplum 6 has no
// IF NOT EXISTS there: a partition another writer added meanwhile is
// found by listing again.
func (s *store) ensurePartition(ctx context.Context, i int, d time.Time) error {
	if s.days[i][d] {
		return nil
	}
	t := s.tables[i]
	if _, err := s.conn.Exec(ctx, gpsql.AddHistoryPartition(s.dialect, t.HistoryTable, d)); err != nil {
		days, listErr := s.partitionDays(ctx, t)
		if listErr != nil || !days[d] {
			return fmt.Errorf("add the partition of %s to %s: %w", d.Format(time.DateOnly), t.Name, err)
		}
		s.days[i] = days
	}
	s.days[i][d] = true
	return nil
}
