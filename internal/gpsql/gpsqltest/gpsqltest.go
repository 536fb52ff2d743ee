// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package gpsqltest runs the statements of gpsql's table against a server,
// for the conformance tests (the testbed's dialects, and a real server).
package gpsqltest

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/gpsql"
)

// Send sends one statement as gpotel does: a COPY ... FROM STDIN with no
// rows (the server still checks the table and its columns), anything
// else as a query whose rows are read to the end.
func Send(ctx context.Context, conn *pgx.Conn, text string, args ...any) error {
	if strings.HasPrefix(text, "COPY ") {
		_, err := conn.PgConn().CopyFrom(ctx, strings.NewReader(""), text)
		return err
	}
	rows, err := conn.Query(ctx, text, args...)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// RunHistory sends every history statement of the table for shape, in
// the table's order (each builds on the ones before: schema, table,
// partitions, staging), and returns one error per statement the server
// refused. The sample schema must not exist yet.
func RunHistory(ctx context.Context, conn *pgx.Conn, shape gpsql.Shape) []error {
	var errs []error
	for _, s := range gpsql.Statements {
		if s.Target != gpsql.History {
			continue
		}
		text := s.Text(shape)
		if text == "" {
			continue
		}
		if err := Send(ctx, conn, text, s.Args...); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w\n%s", s.Name, err, text))
		}
	}
	return errs
}
