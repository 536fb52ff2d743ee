// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/pipeline"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

func listAll(t *testing.T, srv *testServer) *yagpcc.GetGPSessionsResponse {
	t.Helper()
	resp, err := srv.client.GetGPSessions(ctxTimeout(t), &yagpcc.GetGPSessionsReq{ShowSystem: true, PageSize: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestGoneSessionsStayForTheGracePeriod(t *testing.T) {
	cfg := testConfig()
	cfg.SessionGracePeriod = 30 * time.Second
	srv := startServer(t, cfg, nopHost())
	srv.consume(t, buildSnapshot(t0, sessionsWithUserTime([]int64{1, 2}, 10)))
	srv.consume(t, buildSnapshot(t0.Add(10*time.Second), sessionsWithUserTime([]int64{2}, 10)))

	resp := listAll(t, srv)
	if got := sessIDs(resp); !equalInts(got, []int64{1, 2}) {
		t.Fatalf("inside the grace period: %v, want [1 2]", got)
	}
	// The gone session keeps the time of the last snapshot that held it.
	if got := resp.SessionsState[0].Time.AsTime(); !got.Equal(t0) {
		t.Fatalf("gone session time %v, want %v", got, t0)
	}
	if got := resp.SessionsState[1].Time.AsTime(); !got.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("live session time %v, want the newest snapshot's", got)
	}
	srv.consume(t, buildSnapshot(t0.Add(31*time.Second), sessionsWithUserTime([]int64{2}, 10)))
	if got := sessIDs(listAll(t, srv)); !equalInts(got, []int64{2}) {
		t.Fatalf("after the grace period: %v, want [2]", got)
	}
}

func TestSessionReturnsWithNewState(t *testing.T) {
	srv := startDefault(t)
	s := fullSession()
	srv.consume(t, buildSnapshot(t0, []testSession{s}))
	s.meta[pipeline.MetaState] = "idle"
	srv.consume(t, buildSnapshot(t0.Add(time.Second), []testSession{s}))
	got := listAll(t, srv).SessionsState[0]
	if got.SessionInfo.State != "idle" || got.RunningQueryInfo != nil {
		t.Fatalf("state not replaced by the newer snapshot: %q, running %v", got.SessionInfo.State, got.RunningQueryInfo)
	}
	if !got.Time.AsTime().Equal(t0.Add(time.Second)) {
		t.Fatalf("time %v not the newer snapshot's", got.Time.AsTime())
	}
}

func TestMaxSessionsBoundsTheStoreAndLogsOnce(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSessions = 3
	cfg.SessionGracePeriod = 0
	srv := startServer(t, cfg, nopHost())
	five := sessionsWithUserTime(idRange(1, 6), 10)
	srv.consume(t, buildSnapshot(t0, five))
	if got := sessIDs(listAll(t, srv)); !equalInts(got, []int64{1, 2, 3}) {
		t.Fatalf("bounded store: %v, want the first 3 of the snapshot", got)
	}
	srv.consume(t, buildSnapshot(t0.Add(time.Second), five))
	if n := srv.logs.FilterMessageSnippet("max_sessions reached").Len(); n != 1 {
		t.Fatalf("want one bound log line while the bound holds, got %d", n)
	}
	srv.consume(t, buildSnapshot(t0.Add(2*time.Second), five[:2]))
	if n := srv.logs.FilterMessageSnippet("back under max_sessions").Len(); n != 1 {
		t.Fatalf("want one recovery line, got %d", n)
	}
	srv.consume(t, buildSnapshot(t0.Add(3*time.Second), five))
	if n := srv.logs.FilterMessageSnippet("max_sessions reached").Len(); n != 2 {
		t.Fatalf("want a second bound line after recovery, got %d", n)
	}
}

func TestBadInputIsSkippedNotServed(t *testing.T) {
	srv := startDefault(t)
	md := buildSnapshot(t0, sessionsWithUserTime([]int64{1}, 10))
	// A session resource without its id, and a resource that is not ours.
	bad := md.ResourceMetrics().AppendEmpty()
	bad.Resource().Attributes().PutStr(pipeline.AttrResourceKind, pipeline.KindSession.String())
	bad.Resource().Attributes().PutInt(pipeline.AttrTmID, testTmID)
	foreign := md.ResourceMetrics().AppendEmpty()
	foreign.Resource().Attributes().PutStr("service.name", "other")
	srv.consume(t, md)
	if got := sessIDs(listAll(t, srv)); !equalInts(got, []int64{1}) {
		t.Fatalf("got %v, want [1]", got)
	}
	if n := srv.logs.FilterMessageSnippet("were skipped").Len(); n != 1 {
		t.Fatalf("want the skipped resource logged, got %d lines", n)
	}
	// Metrics that hold nothing of ours leave the store as it was.
	srv.consume(t, pmetric.NewMetrics())
	if got := sessIDs(listAll(t, srv)); !equalInts(got, []int64{1}) {
		t.Fatalf("after foreign metrics: %v, want [1]", got)
	}
}

func TestSnapshotNotNewerIsIgnored(t *testing.T) {
	srv := startDefault(t)
	srv.consume(t, buildSnapshot(t0, sessionsWithUserTime([]int64{1}, 10)))
	srv.consume(t, buildSnapshot(t0.Add(-time.Minute), sessionsWithUserTime([]int64{7}, 10)))
	srv.consume(t, buildSnapshot(t0, sessionsWithUserTime([]int64{8}, 10)))
	resp := listAll(t, srv)
	if got := sessIDs(resp); !equalInts(got, []int64{1}) {
		t.Fatalf("got %v, want [1]", got)
	}
	if !timeEqual(resp.SessionsState[0].Time, t0) {
		t.Fatalf("time %v, want %v", resp.SessionsState[0].Time.AsTime(), t0)
	}
}

func timeEqual(ts *timestamppb.Timestamp, t time.Time) bool {
	return ts.AsTime().Equal(t)
}

func TestSessionsWithoutSnapshotResourceUseTheirOwnTime(t *testing.T) {
	srv := startDefault(t)
	md := buildSnapshot(t0, sessionsWithUserTime([]int64{1}, 10))
	md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		k, _ := rm.Resource().Attributes().Get(pipeline.AttrResourceKind)
		return k.Str() == pipeline.KindSnapshot.String()
	})
	srv.consume(t, md)
	got := listAll(t, srv).SessionsState[0]
	if !got.Time.AsTime().Equal(t0) || got.Hostname != testCoordinator {
		t.Fatalf("time %v host %q, want %v and the session's host.name", got.Time.AsTime(), got.Hostname, t0)
	}
}

func TestEmptySnapshotEndsEverySession(t *testing.T) {
	cfg := testConfig()
	cfg.SessionGracePeriod = 0
	srv := startServer(t, cfg, nopHost())
	srv.consume(t, buildSnapshot(t0, sessionsWithUserTime([]int64{1, 2}, 10)))
	srv.consume(t, buildSnapshot(t0.Add(time.Second), nil))
	if got := sessIDs(listAll(t, srv)); len(got) != 0 {
		t.Fatalf("after an empty snapshot: %v, want none", got)
	}
}

// pausingCore holds the goroutine that logs a message containing snippet
// until release is closed, after closing paused.
type pausingCore struct {
	zapcore.Core
	snippet string
	paused  chan struct{}
	release chan struct{}
}

func (c *pausingCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if strings.Contains(e.Message, c.snippet) {
		return ce.AddCore(e, c)
	}
	return c.Core.Check(e, ce)
}

func (c *pausingCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	close(c.paused)
	<-c.release
	return c.Core.Write(e, fields)
}

// The API serves the last whole snapshot while the next one is being
// consumed: a consume held in the middle (its ingest lock taken, its
// snapshot read, the new view not yet stored) does not block a read.
func TestReadsAreNotBlockedByAConsumeInProgress(t *testing.T) {
	pause := &pausingCore{snippet: "were skipped", paused: make(chan struct{}), release: make(chan struct{})}
	srv := startServerLogging(t, testConfig(), nopHost(), func(c zapcore.Core) zapcore.Core {
		pause.Core = c
		return pause
	})
	srv.consume(t, buildSnapshot(t0, sessionsWithUserTime([]int64{1}, 10)))

	// The next snapshot holds a session resource without its id: its
	// consume logs that while it holds the ingest lock, and is held there.
	next := buildSnapshot(t0.Add(10*time.Second), sessionsWithUserTime([]int64{2}, 10))
	bad := next.ResourceMetrics().AppendEmpty()
	bad.Resource().Attributes().PutStr(pipeline.AttrResourceKind, pipeline.KindSession.String())
	bad.Resource().Attributes().PutInt(pipeline.AttrTmID, testTmID)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(pause.release) }) }
	t.Cleanup(release)
	consumed := make(chan error, 1)
	go func() { consumed <- srv.exp.ConsumeMetrics(context.Background(), next) }()
	ctx := ctxTimeout(t)
	select {
	case <-pause.paused:
	case <-ctx.Done():
		t.Fatal("the consume never reached its log line")
	}

	type answer struct {
		ids []int64
		err error
	}
	read := make(chan answer, 1)
	go func() {
		resp, err := srv.client.GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{ShowSystem: true})
		if err == nil {
			_, err = srv.client.GetGPSession(ctx, &yagpcc.GetGPSessionReq{SessionKey: &yagpcc.SessionKey{SessId: 1, TmId: testTmID}})
		}
		read <- answer{sessIDs(resp), err}
	}()
	select {
	case got := <-read:
		if got.err != nil {
			t.Fatalf("read during the consume: %v", got.err)
		}
		if !equalInts(got.ids, []int64{1}) {
			t.Fatalf("read during the consume served %v, want the last whole snapshot's [1]", got.ids)
		}
	case <-ctx.Done():
		t.Fatal("GetGPSessions did not answer while a consume was in progress")
	}

	release()
	select {
	case err := <-consumed:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the consume did not finish once released")
	}
	if got := sessIDs(listAll(t, srv)); !equalInts(got, []int64{1, 2}) {
		t.Fatalf("after the consume: %v, want [1 2] (1 inside its grace period)", got)
	}
}
