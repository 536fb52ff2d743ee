// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster_test

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// TestGreenplumDialectsLogGreenplumsLayout: a segment of the gp6 dialect
// writes its log where and how Greenplum 6 does: pg_log/gpdb-<time>.csv,
// 30 columns, the process as p<pid>, the session as con<N> from its tag's
// number (the name after it is not part of it) and the segment as
// seg<content>, a message with a quote and a newline in one quoted field.
func TestGreenplumDialectsLogGreenplumsLayout(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP6})
	if c.LogDestination != cluster.LogGreenplumCSV {
		t.Fatalf("gp6 logs %q, want %q", c.LogDestination, cluster.LogGreenplumCSV)
	}
	seg, _ := c.Instance(0)
	conn := connect(t, seg.DSN, map[string]string{"application_name": cluster.SessionTagPrefix + "42 gpotel-workload w"})
	pid := backendPID(t, conn)
	const msg = "a \"quoted\"\nline"
	if _, err := conn.Exec(await.Context(t), `DO $$BEGIN RAISE LOG 'a "quoted"%line', E'\n'; END$$`); err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^gpdb-\d{4}-\d\d-\d\d_\d{6}\.csv$`)
	var record []string
	await.NoError(t, "the message in pg_log/gpdb-*.csv", func() error {
		files, err := filepath.Glob(filepath.Join(seg.DataDir, "pg_log", "gpdb-*.csv"))
		if err != nil {
			return err
		}
		for _, f := range files {
			if !name.MatchString(filepath.Base(f)) {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			r := csv.NewReader(bytes.NewReader(b))
			r.FieldsPerRecord = -1
			for {
				rec, err := r.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					continue // a line the server wrote to stderr, as a real Greenplum's file gets too
				}
				if len(rec) > 18 && rec[18] == msg {
					record = rec
					return nil
				}
			}
		}
		return errors.New("not yet")
	})
	if len(record) != 30 || record[3] != fmt.Sprintf("p%d", pid) || record[9] != "con42" || record[11] != "seg0" || record[16] != "LOG" ||
		!regexp.MustCompile(`^th-?\d+$`).MatchString(record[4]) {
		t.Fatalf("the record in Greenplum's layout: %d columns %q", len(record), record)
	}
}
