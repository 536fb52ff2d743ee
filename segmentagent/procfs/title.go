// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

// ParseCommandCount reads the command count from a Greenplum or Cloudberry
// process title, as ParseCmdline leaves it: the cmd<N> that follows
// con<sess_id> and, on a segment, seg<content>
// ("postgres:  6000, gpadmin tpch 10.0.0.1(50000) con12 seg0 cmd5 slice1 MPPEXEC SELECT",
// "postgres:  5432, gpadmin tpch con12 cmd5 idle 10.0.0.1(50000)").
// The last such run wins: the activity and host after it are never of that
// shape, while a user or database name before it may be. ok is false for a
// title without one (PostgreSQL, a Greenplum process between sessions).
func ParseCommandCount(title []byte) (ccnt int64, ok bool) {
	var prev1, prev2 []byte // the two words before the current one
	for len(title) > 0 {
		var word []byte
		word, title = nextWord(title)
		if n, isCmd := numbered(word, "cmd", false); isCmd {
			_, afterCon := numbered(prev1, "con", false)
			_, afterSeg := numbered(prev1, "seg", true)
			_, segAfterCon := numbered(prev2, "con", false)
			if afterCon || (afterSeg && segAfterCon) {
				ccnt, ok = n, true
			}
		}
		prev2, prev1 = prev1, word
	}
	return ccnt, ok
}

// nextWord splits off the first blank-separated word of b.
func nextWord(b []byte) (word, rest []byte) {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	i := 0
	for i < len(b) && b[i] != ' ' {
		i++
	}
	return b[:i], b[i:]
}

// numbered reads word as prefix<N>, N a decimal that fits in an int32 (as
// Greenplum's counters do); signed allows a leading '-' (seg-1, an entry-db
// process on the coordinator).
func numbered(word []byte, prefix string, signed bool) (int64, bool) {
	if len(word) <= len(prefix) || string(word[:len(prefix)]) != prefix {
		return 0, false
	}
	digits := word[len(prefix):]
	neg := signed && digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	// Greenplum prints plain decimals: no sign but seg's, no leading zero.
	if len(digits) == 0 || len(digits) > 10 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > 1<<31-1 {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}
