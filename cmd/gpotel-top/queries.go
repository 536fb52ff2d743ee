// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// queryRow is one query of GetClusterTop with its session's who.
type queryRow struct {
	q       *gpotelv1.QueryTop
	session *SessionRow // nil: the session is not in the list (ended and gone)
	// who is the session, or what is known of it once gone (user,
	// database, gpotel's own; empty when nothing is).
	who SessionRow
}

// apiKey is the query's yagpcc key: what k cancels and GetGPQuery answers for.
func (r queryRow) apiKey() *yagpcc.QueryKey {
	// yagpcc's key is int32: the API's ids fit it.
	k := &yagpcc.QueryKey{Tmid: int32(r.q.GetTmId()), Ssid: int32(r.q.GetSessId()), Ccnt: int32(r.q.GetCommandCount())} //nolint:gosec // see above
	if r.q.CommandCount == nil {
		k.QueryStart = timestamppb.New(time.Unix(0, r.q.GetStartUnixNano()))
	}
	return k
}

// running: the query runs now, in a session the newest snapshot holds.
func (r queryRow) running() bool {
	return !r.q.GetCompleted() && r.session != nil && !r.session.Ended
}

// queryColumns are the queries view's columns; the text takes the rest.
// Figures are averages over each query's duration.
func queryColumns(capa capacity) table[queryRow] {
	return table[queryRow]{
		columns: []column[queryRow]{
			{"SESS", 7, false, 0, func(r queryRow) string { return strconv.FormatInt(r.q.GetSessId(), 10) }},
			{"CCNT", 5, false, 9, func(r queryRow) string {
				if r.q.CommandCount == nil {
					return absentText
				}
				return strconv.FormatInt(r.q.GetCommandCount(), 10)
			}},
			{"USER", 9, true, 2, func(r queryRow) string { return valueOr(r.who.User) }},
			{"ST", 5, true, 1, func(r queryRow) string {
				s := "run"
				switch {
				case r.q.GetCompleted():
					s = "done"
				case r.session == nil || r.session.Ended:
					s = "ended"
				}
				if r.q.GetPartial() {
					s += "*"
				}
				return s
			}},
			{"DUR", 6, false, 1, func(r queryRow) string { return durationText(r.q.GetDurationSeconds()) }},
			{"CPU%", 6, false, 0, func(r queryRow) string {
				if r.q.GetUsage() == nil {
					return absentText
				}
				return cpuText(r.q.GetUsage().GetCpuCores(), capa.cluster)
			}},
			{"RD/s", 5, false, 3, func(r queryRow) string {
				if r.q.GetUsage() == nil {
					return absentText
				}
				return bytesText(r.q.GetUsage().GetReadBytesPerSecond())
			}},
			{"WR/s", 5, false, 3, func(r queryRow) string {
				if r.q.GetUsage() == nil {
					return absentText
				}
				return bytesText(r.q.GetUsage().GetWriteBytesPerSecond())
			}},
			// The most workfile bytes the query held at once (Greenplum).
			{"SPILL", 5, false, 4, func(r queryRow) string { return bytesText(float64(r.q.GetSpillBytesMax())) }},
			{"SKEW", 7, false, 8, func(r queryRow) string { return skewText(r.q.GetCpuSkew(), r.q.CpuHottestSegment) }},
		},
		textTitle: "QUERY",
		text:      func(r queryRow) string { return oneLine(r.q.GetQuery()) },
		textMin:   16,
		wide:      map[string]int{"USER": 20},
	}
}
