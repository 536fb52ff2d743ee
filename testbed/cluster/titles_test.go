// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// greenplumTitle is the part of a title gpotel reads: con<N> [seg<k>] [cmd<M>] [slice<s>] activity.
var greenplumTitle = regexp.MustCompile(` con([0-9]+)(?: seg(-?[0-9]+))?(?: cmd([0-9]+))?(?: slice[0-9]+)? (.*)$`)

var errNoGreenplumTitle = errors.New("no con<N> in the title")

type title struct {
	sess, ccnt int64 // ccnt 0: none
	seg        string
	activity   string
}

func readTitle(pid int) (title, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return title{}, err
	}
	line := bytes.TrimRight(bytes.ReplaceAll(b, []byte{0}, []byte{' '}), " ")
	m := greenplumTitle.FindSubmatch(line)
	if m == nil {
		return title{}, fmt.Errorf("%w: %q", errNoGreenplumTitle, line)
	}
	var tl title
	tl.sess, _ = strconv.ParseInt(string(m[1]), 10, 64)
	tl.seg = string(m[2])
	tl.ccnt, _ = strconv.ParseInt(string(m[3]), 10, 64)
	tl.activity = string(m[4])
	return tl, nil
}

// The Greenplum dialects' backends carry Greenplum's titles, counting
// commands by Greenplum 6's rule: a simple query counts one at its start
// and one for its plan, a utility statement or one that fails in analysis
// one, an extended-protocol query one; an executor shows the count its
// dispatcher set while it runs and none when idle.
func TestTitlesNumberCommandsAsGreenplum6Does(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Hosts: 1, SegmentsPerHost: 1, Dialect: dialect.GP6})
	ctx := await.Context(t)
	coord := connect(t, c.CoordinatorDSN, nil)
	pid, sess := backendPID(t, coord), int64(sessIDOf(t, coord))
	idle := func() int64 {
		var tl title
		await.NoError(t, "the coordinator's idle title", func() error {
			var err error
			tl, err = readTitle(pid)
			if errors.Is(err, errNoGreenplumTitle) {
				t.Fatal(err) // a title never gains con<N>
			}
			if err == nil && tl.activity != "idle" {
				err = fmt.Errorf("title activity %q", tl.activity)
			}
			return err
		})
		if tl.sess != sess || tl.seg != "" {
			t.Fatalf("coordinator title con%d seg%q, want con%d and no seg", tl.sess, tl.seg, sess)
		}
		if got := coord.PgConn().ParameterStatus(cluster.CommandCountSetting); got != strconv.FormatInt(tl.ccnt, 10) {
			t.Errorf("%s reported %q, the title says cmd%d", cluster.CommandCountSetting, got, tl.ccnt)
		}
		return tl.ccnt
	}
	for _, st := range []struct {
		name  string
		run   func() error
		count int64
	}{
		{"simple SELECT", func() error { _, err := coord.Exec(ctx, "SELECT 1"); return err }, 2},
		{"SET", func() error { _, err := coord.Exec(ctx, "SET work_mem = '8MB'"); return err }, 1},
		{"a column that does not exist", func() error {
			if _, err := coord.Exec(ctx, "SELECT no_such_column FROM pg_class"); err == nil {
				return fmt.Errorf("it did not fail")
			}
			return nil
		}, 1},
		{"extended-protocol SELECT", func() error { var n int; return coord.QueryRow(ctx, "SELECT $1::integer", 1).Scan(&n) }, 1},
	} {
		before := idle()
		if err := st.run(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := idle() - before; got != st.count {
			t.Errorf("%s: the idle title's count went up %d, want %d", st.name, got, st.count)
		}
	}
	if _, err := coord.Exec(ctx, "SET "+cluster.CommandCountSetting+" = 5"); err == nil {
		t.Errorf("SET %s succeeded: the count is the server's own", cluster.CommandCountSetting)
	}

	seg := connect(t, c.Segments[0].DSN, map[string]string{"application_name": fmt.Sprintf("%s%d", cluster.SessionTagPrefix, sess)})
	segPID := backendPID(t, seg)
	if _, err := seg.Exec(ctx, "SET "+cluster.DispatchCommandCountSetting+" = 42"); err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { _, err := seg.Exec(ctx, "SELECT pg_sleep(1)"); ran <- err }()
	await.NoError(t, "the executor's running title", func() error {
		tl, err := readTitle(segPID)
		if err == nil && (tl.sess != sess || tl.seg != "0" || tl.ccnt != 42) {
			err = fmt.Errorf("con%d seg%s cmd%d %s, want con%d seg0 cmd42", tl.sess, tl.seg, tl.ccnt, tl.activity, sess)
		}
		return err
	})
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	await.NoError(t, "the executor's idle title", func() error {
		tl, err := readTitle(segPID)
		if err == nil && (tl.ccnt != 0 || tl.activity != "idle") {
			err = fmt.Errorf("cmd%d %s, want no count and idle", tl.ccnt, tl.activity)
		}
		return err
	})
}
