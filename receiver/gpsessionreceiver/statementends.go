// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/pipeline/snapshot"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// maxEndsPages bounds how many answers the coordinator's statement ends
// take per scrape; the rest come at the next one.
const maxEndsPages = 8

// endsTracker asks the coordinator host's agent each scrape for the
// failed statements and sessions its server log named since the previous
// one (gpotel.v1.StatementEnds; docs/pipeline.md, endings resources). It
// is used by the serial scrape only.
type endsTracker struct {
	logger        *zap.Logger
	host          string
	epoch, cursor uint64
	// unsupported: the agent does not serve StatementEnds (an older one);
	// it is not asked again until it restarts under another address.
	unsupported bool
	reason      string // why the log was not read at the last scrape, once logged
}

func newEndsTracker(logger *zap.Logger) *endsTracker { return &endsTracker{logger: logger} }

// fetch returns the coordinator log's records since the previous scrape as
// endings, and how far the log was read (unix ns; 0: not read).
func (t *endsTracker) fetch(ctx context.Context, cfg *Config, dir *agentDirectory, host string, d dialect.Dialect) ([]snapshot.Ending, int64) {
	if host != t.host {
		*t = endsTracker{logger: t.logger, host: host}
	}
	if _, hasAgent := cfg.Agents[host]; t.unsupported || host == "" || dir.localHosts[host] && !hasAgent {
		// A coordinator read in-process is asked only where an agent serves
		// it too (its address in agents): none other reads its log.
		return nil, 0
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.HostTimeout)
	defer cancel()
	conn, err := dir.agents.Conn(ctx, host)
	if err != nil {
		return nil, 0
	}
	client := gpotelv1.NewStatementEndsClient(conn)
	var out []snapshot.Ending
	var through int64
	for range maxEndsPages {
		resp, err := client.GetStatementEnds(ctx, &gpotelv1.GetStatementEndsRequest{Epoch: t.epoch, Cursor: t.cursor})
		if status.Code(err) == codes.Unimplemented {
			t.unsupported = true
			t.logger.Info("the coordinator's agent serves no statement ends (an older agent): how queries ended is told by exits and pg_stat_activity only",
				zap.String("host", host))
			return out, 0
		}
		if err != nil {
			t.logger.Debug("statement ends not read", zap.String("host", host), zap.Error(err))
			return out, 0
		}
		if resp.GetMissed() > 0 {
			t.logger.Warn("statement ends were dropped on the coordinator's agent before this scrape read them", zap.Uint64("missed", resp.GetMissed()))
		}
		if r := resp.GetReason(); r != "" && r != t.reason {
			t.logger.Warn("a server log on the coordinator's host is not read (where it is the coordinator's, how queries ended is told by exits and "+
				"pg_stat_activity only)", zap.String("reason", r))
		}
		t.reason = resp.GetReason()
		for _, e := range resp.GetRecords() {
			if end, ok := endingOf(e, d); ok {
				out = append(out, end)
			}
		}
		t.epoch, t.cursor = resp.GetEpoch(), resp.GetNextCursor()
		through = resp.GetReadThroughUnixNano()
		if !resp.GetMore() {
			return out, through
		}
	}
	return out, 0 // more is waiting: the log is not read through yet
}

// endingOf is a statement end as the pipeline carries it: on Greenplum its
// session is gp_session_id, elsewhere the backend's pid.
func endingOf(e *gpotelv1.StatementEnd, d dialect.Dialect) (snapshot.Ending, bool) {
	session := e.GetSessionId()
	if !d.Greenplum() {
		session = e.GetPid()
	}
	if session <= 0 || e.GetPid() <= 0 || e.GetTimeUnixNano() <= 0 {
		return snapshot.Ending{}, false
	}
	return snapshot.Ending{Session: session, PID: e.GetPid(), Time: e.GetTimeUnixNano(), SessionStart: max(e.GetSessionStartUnixNano(), 0),
		CommandCount: e.GetCommandCount(), Severity: e.GetSeverity(), SQLState: e.GetSqlstate(), Message: snapshot.CutMessage(e.GetMessage())}, true
}
