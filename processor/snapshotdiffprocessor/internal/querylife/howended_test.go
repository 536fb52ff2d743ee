// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package querylife

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gpotel/gpotel/internal/pipeline/events"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
)

// Greenplum logs a statement's failure at the command count its title
// showed (a parse error) or past it (CreateQueryDesc counts again): a
// record with a smaller count is an earlier statement's.
func TestRecordOfAnEarlierCommandIsNotTheQuerys(t *testing.T) {
	q := &query{start: ns(0), end: ns(1.5), seen: seenIdle, ccnt: 5}
	earlier := logged(1.4995, "ERROR", "42703", "column t1.b does not exist")
	earlier.CommandCount = 4
	says := &serverSays{logged: []snapshot.Ending{earlier}}
	assert.Equal(t, events.QueryCompleted, judgeQuery(q, says, logCovers).status)
	for _, cmd := range []int64{5, 6} {
		says.logged[0].CommandCount = cmd
		assert.Equal(t, events.QueryError, judgeQuery(q, says, logCovers).status, "cmd%d", cmd)
	}
}

// Greenplum's numbering rule on the counts a real 6.24.3 coordinator gave
// one session (docs/compatibility.md): SELECT ran as cmd1 (idle cmd2); a
// 42703 failed at analysis, logged and idle cmd3; SELECT cmd4 (idle cmd5);
// SET (idle cmd6); a 22012 logged and idle cmd8; SELECT cmd9. A statement
// seen idle after it owns only the records at its idle title's count; one
// seen only running with title N owns N and N+1, and a failure past N+1
// is a later statement's or its functions': neither its nor completed.
func TestLogRecordMatchesByGreenplumsNumbering(t *testing.T) {
	record := func(cmd int64, sqlstate string) *serverSays {
		r := logged(1.4, "ERROR", sqlstate, "its message")
		r.CommandCount = cmd
		return &serverSays{logged: []snapshot.Ending{r}}
	}
	idleAfter := func(running, idle int64) *query {
		return &query{start: ns(0), end: ns(1.5), seen: seenIdle, ccnt: running, lastCcnt: idle}
	}
	for _, tc := range []struct {
		name string
		q    *query
		says *serverSays
		want string
	}{
		{"SELECT cmd1 (idle cmd2), the 42703 after it at cmd3", idleAfter(1, 2), record(3, "42703"), events.QueryCompleted},
		{"the 42703 seen only idle, at its own cmd3", idleAfter(3, 3), record(3, "42703"), events.QueryError},
		{"the 22012 seen only idle (cmd8), at cmd8", idleAfter(8, 8), record(8, "22012"), events.QueryError},
		{"the 22012 seen only idle (cmd8), a record at cmd9", idleAfter(8, 8), record(9, "22012"), events.QueryCompleted},
		{"SELECT cmd4 (idle cmd5), a record at cmd6", idleAfter(4, 5), record(6, "22012"), events.QueryCompleted},
		{"SELECT cmd4 (idle cmd5), a record at cmd5", idleAfter(4, 5), record(5, "57014"), events.QueryCancelled},
		{"a testbed record without a count", idleAfter(4, 5), record(0, "22012"), events.QueryError},
		// Its idle title read a moment late shows the next statement's cmd6.
		{"SELECT cmd4 failing at cmd5, idle title read as cmd6", idleAfter(4, 6), record(5, "22012"), events.QueryError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, judgeQuery(tc.q, tc.says, logCovers).status)
		})
	}

	// Seen running as cmd1, then its backend exited 0: a cancel is logged
	// cmd2, an analysis error cmd1; cmd3 is the next statement's parse
	// error (or a function's), which leaves this one's end untold.
	for _, tc := range []struct {
		cmd               int64
		sqlstate, message string
		want              string
	}{
		{1, "42703", "column t1.b does not exist", events.QueryError},
		{2, "57014", "canceling statement due to user request", events.QueryCancelled},
		{3, "42703", "column t1.b does not exist", events.QueryUnknown},
		{4, "22012", "division by zero", events.QueryUnknown},
	} {
		q := &query{start: ns(0), seen: sessionLeft, ccnt: 1}
		says := record(tc.cmd, tc.sqlstate)
		says.logged[0].Message = tc.message
		says.exit = &snapshot.Ending{Exited: true, Time: ns(1.8)}
		assert.Equal(t, tc.want, judgeQuery(q, says, logCovers).status, "seen running as cmd1, a record at cmd%d", tc.cmd)
	}
}
