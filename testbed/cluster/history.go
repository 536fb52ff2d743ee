// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// HistoryGrants are what docs/operations.md has a DBA run for the history
// exporter: its role and database (a test holds the two in step).
var HistoryGrants = []string{
	"CREATE ROLE gpotel_history LOGIN",
	"CREATE DATABASE gpotel_history",
	"GRANT CREATE, TEMPORARY ON DATABASE gpotel_history TO gpotel_history",
}

// CreateHistoryDatabase runs HistoryGrants on the coordinator. The new
// database is a copy of template1, which has none of the emulated
// Greenplum catalog: there version() answers as the PostgreSQL it is.
func (c *Cluster) CreateHistoryDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.CoordinatorDSN)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	// One at a time: CREATE DATABASE cannot run inside a transaction.
	for _, stmt := range HistoryGrants {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}
