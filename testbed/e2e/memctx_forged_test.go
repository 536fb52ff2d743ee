// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// forgedTotal is the TopMemoryContext size of every forged block.
const forgedTotal = 999999999

// forgedBlock is a complete memory-context block of pid in the layout's own
// record syntax, written without quotes (the server doubles any quote inside
// a logged statement, which would spoil a quoted forgery).
func forgedBlock(layout string, pid int) string {
	now := time.Now().UTC()
	msgs := []string{
		fmt.Sprintf("logging memory contexts of PID %d", pid),
		fmt.Sprintf("level: 0; TopMemoryContext: %d total in 1 blocks; 0 free (0 chunks); %d used", forgedTotal, forgedTotal),
		fmt.Sprintf("Grand total: %d bytes in 1 blocks; 0 free (0 chunks); %d used", forgedTotal, forgedTotal),
	}
	var b strings.Builder
	for _, m := range msgs {
		switch layout {
		case cluster.LogStderr:
			fmt.Fprintf(&b, "%s [%d] gpadmin@postgres LOG:  %s\n", now.Format("2006-01-02 15:04:05.000 MST"), pid, m)
		case cluster.LogCSV:
			fmt.Fprintf(&b, "%s,gpadmin,postgres,%d,[local],6b.4c,1,SELECT,%s,3/2,0,LOG,00000,%s,,,,,,,,,psql,client backend,,0\n",
				now.Format("2006-01-02 15:04:05.000 MST"), pid, now.Format("2006-01-02 15:04:05 MST"), m)
		case cluster.LogGreenplumCSV:
			fmt.Fprintf(&b, "%s,gpadmin,postgres,p%d,th1,[local],,%s,0,con1,cmd1,seg-1,,,,,LOG,00000,%s,,,,,,,0,,,,\n",
				now.Format("2006-01-02 15:04:05.000000 MST"), pid, now.Format("2006-01-02 15:04:05 MST"), m)
		}
	}
	return b.String()
}

// TestForgedLogLinesAreIgnored: a database user without privileges plants
// a complete memory-context block of another backend in the server log, in
// a logged statement and in a RAISE LOG message, while the agent waits for
// that backend's answer; the agent answers the backend's real tree. (A
// reader that starts inside a quoted CSV record is the unit test
// TestTheReaderTrustsNothingBeforeTheAgentsMark: a real server leaves its
// file mid-record only for the moment between two writes of one record.)
func TestForgedLogLinesAreIgnored(t *testing.T) {
	needTestbed(t)
	for _, opts := range []cluster.Options{
		{Dialect: dialect.PostgreSQL, LogDestination: cluster.LogStderr},
		{Dialect: dialect.PostgreSQL, LogDestination: cluster.LogCSV},
		{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.Cloudberry},
	} {
		t.Run(layoutName(opts), func(t *testing.T) {
			c := cluster.Start(t, opts)
			ctx := await.Context(t)
			in := c.Coordinator
			victim, err := pgx.Connect(ctx, in.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = victim.Close(context.Background()) }()
			vpid := int(victim.PgConn().PID())
			attacker, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", cluster.UserRole, in.Port, cluster.Database))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = attacker.Close(context.Background()) }()
			forged := forgedBlock(c.LogDestination, vpid)
			a := startMemctxAgent(t, c, cluster.CoordinatorHost, nil)

			resumed := stopProcess(t, vpid)
			defer resumed()
			done := a.askInBackground(ctx, vpid)
			waitSignalPending(t, vpid, syscall.SIGUSR1)
			_, err = attacker.Exec(ctx, "SELECT 1/0 /*\n"+forged+"*/")
			if err == nil || !strings.Contains(err.Error(), "division by zero") {
				t.Fatalf("the planted statement: %v, want division by zero", err)
			}
			if _, err := attacker.Exec(ctx, "DO $$BEGIN RAISE LOG 'a note%', $f$\n"+forged+"$f$; END$$"); err != nil {
				t.Fatalf("the planted RAISE LOG: %v", err)
			}
			resumed()
			got := <-done
			if got.err != nil {
				t.Fatal(got.err)
			}
			var own int64
			if err := victim.QueryRow(ctx, "SELECT total_bytes FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext'").Scan(&own); err != nil {
				t.Fatal(err)
			}
			rows := got.resp.GetContexts()
			t.Logf("%s: %d contexts; TopMemoryContext %d B, the backend's own view %d B", got.resp.GetSource(), len(rows), rows[0].GetTotalBytes(), own)
			if rows[0].GetTotalBytes() == forgedTotal || got.resp.GetGrandTotal().GetTotalBytes() == forgedTotal {
				t.Fatalf("the answer is the forged block: %v", rows)
			}
			if len(rows) < 10 || rows[0].GetName() != "TopMemoryContext" || !within(float64(rows[0].GetTotalBytes()), float64(own), 0.05) {
				t.Fatalf("the answer is not the backend's tree: %d contexts, first %v (its own TopMemoryContext %d B)", len(rows), rows[0], own)
			}
		})
	}
}
