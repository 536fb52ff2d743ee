// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package memorycontexts serves gpotel.v1.SessionMemoryContexts for the
// sessionstate exporter: it asks the agent of every host a session's
// backends run on for their memory contexts, in parallel and within each
// caller's rate, and rolls the answers up by context name.
package memorycontexts

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/agentconn"
	"github.com/gpotel/gpotel/internal/pipeline"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// agentGrace is added to the backend timeout for the agent's own work
// (connecting, reading the settings) and the network.
const agentGrace = 3 * time.Second

// Sessions finds a session's backends in the newest snapshot.
type Sessions interface {
	// Backends is the session's backends on every host and the newest
	// snapshot's time; live is false when that snapshot does not hold it.
	Backends(key pipeline.SessionKey) (backends []pipeline.BackendRef, snapshot time.Time, live bool)
}

// Service answers GetSessionMemoryContexts: it asks the agent of every
// host the session's backends run on, in parallel, and rolls the answers
// up by context name.
type Service struct {
	gpotelv1.UnimplementedSessionMemoryContextsServer

	sessions         Sessions
	agents           *agentconn.Pool
	cfg              Config
	maxResponseBytes int
	callers          *callerBuckets
	now              func() time.Time
}

var _ gpotelv1.SessionMemoryContextsServer = (*Service)(nil)

// NewService answers from sessions through agents, each answer within
// maxResponseBytes.
func NewService(sessions Sessions, agents *agentconn.Pool, cfg Config, maxResponseBytes int) *Service {
	return &Service{sessions: sessions, agents: agents, cfg: cfg, maxResponseBytes: maxResponseBytes,
		callers: newCallerBuckets(cfg.CallerMaxRate, cfg.CallerMaxBurst), now: time.Now}
}

// GetSessionMemoryContexts asks the session's backends' agents, within the
// caller's rate and the response bound.
func (svc *Service) GetSessionMemoryContexts(
	ctx context.Context, req *gpotelv1.GetSessionMemoryContextsRequest,
) (*gpotelv1.GetSessionMemoryContextsResponse, error) {
	key := req.GetSessionKey()
	if key == nil {
		return nil, status.Error(codes.InvalidArgument, "session_key is required")
	}
	timeout := svc.cfg.Timeout
	if d := req.GetTimeout(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 || d.AsDuration() > time.Minute {
			return nil, status.Errorf(codes.InvalidArgument, "timeout %v must be between 0 and 1m", d.AsDuration())
		}
		if d.AsDuration() > 0 {
			timeout = d.AsDuration()
		}
	}
	sessionBackends, snapshot, live := svc.sessions.Backends(pipeline.SessionKey{TmID: key.GetTmId(), ID: key.GetSessId()})
	if !live {
		return nil, status.Errorf(codes.NotFound, "session tm_id %d sess_id %d is not in the newest snapshot", key.GetTmId(), key.GetSessId())
	}
	if len(sessionBackends) == 0 {
		return nil, status.Errorf(codes.FailedPrecondition,
			"session tm_id %d sess_id %d: the snapshot lists none of its backends (gpotel.session.info has no \"backends\")",
			key.GetTmId(), key.GetSessId())
	}
	// Only a request that would signal backends takes a token.
	caller := callerOf(ctx)
	if wait, ok := svc.callers.take(caller, svc.now()); !ok {
		return nil, status.Errorf(codes.ResourceExhausted, "%s: at most %d memory-context requests at once and then one every %s "+
			"(memory_contexts::caller_max_burst, caller_max_rate): try again in %s",
			caller, svc.cfg.CallerMaxBurst, everyOf(svc.cfg.CallerMaxRate), wait.Round(time.Second))
	}
	asked := sessionBackends[:min(len(sessionBackends), svc.cfg.MaxBackends)]
	backends := make([]*gpotelv1.BackendMemoryContexts, len(asked))
	budget := answerBudget{left: svc.maxResponseBytes / 2, limit: svc.maxResponseBytes}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(svc.cfg.MaxParallel)
	for i, ref := range asked {
		g.Go(func() error {
			backends[i] = budget.admit(svc.askAgent(gctx, ref, req.GetSummary(), timeout))
			return nil
		})
	}
	_ = g.Wait()
	if rest := len(sessionBackends) - len(asked); rest > 0 {
		backends = append(backends, &gpotelv1.BackendMemoryContexts{Error: fmt.Sprintf(
			"%s: %d more backends of this session were not asked: memory_contexts.max_backends %d", codes.ResourceExhausted, rest, svc.cfg.MaxBackends)})
	}
	resp := &gpotelv1.GetSessionMemoryContextsResponse{
		SessionKey:   key,
		SnapshotTime: timestamppb.New(snapshot),
		Backends:     backends,
	}
	resp.Rollup, resp.GrandTotalBytes, resp.Partial = rollUp(backends, svc.cfg.TopBackends)
	if err := fitResponse(resp, svc.maxResponseBytes); err != nil {
		return nil, err
	}
	return resp, nil
}

// answerBudget shares half of max_response_bytes among the backends'
// answers, as they arrive; the roll-up has the other half.
type answerBudget struct {
	mu    sync.Mutex
	left  int
	limit int
}

// admit keeps an answer that fits what is left, else replaces it by an error.
func (b *answerBudget) admit(a *gpotelv1.BackendMemoryContexts) *gpotelv1.BackendMemoryContexts {
	if a.GetError() != "" {
		return a
	}
	size := proto.Size(a)
	b.mu.Lock()
	defer b.mu.Unlock()
	if size <= b.left {
		b.left -= size
		return a
	}
	return &gpotelv1.BackendMemoryContexts{Hostname: a.GetHostname(), SegmentId: a.GetSegmentId(), Pid: a.GetPid(), Error: fmt.Sprintf(
		"%s: its answer of %d bytes does not fit in max_response_bytes %d beside the other backends' (summary: true answers less)",
		codes.ResourceExhausted, size, b.limit)}
}

// rollupField is GetSessionMemoryContextsResponse.rollup, to size its rows.
var rollupField = (&gpotelv1.GetSessionMemoryContextsResponse{}).ProtoReflect().Descriptor().Fields().ByName("rollup").Number()

// fitResponse drops the smallest roll-up rows until resp fits in limit,
// marking it partial; without them it must fit.
func fitResponse(resp *gpotelv1.GetSessionMemoryContextsResponse, limit int) error {
	size := proto.Size(resp)
	for size > limit && len(resp.Rollup) > 0 {
		last := resp.Rollup[len(resp.Rollup)-1]
		size -= protowire.SizeTag(rollupField) + protowire.SizeBytes(proto.Size(last))
		resp.Rollup = resp.Rollup[:len(resp.Rollup)-1]
		resp.Partial = true
	}
	if size > limit {
		return status.Errorf(codes.ResourceExhausted, "the answer for %d backends needs %d bytes without its roll-up, more than max_response_bytes %d",
			len(resp.GetBackends()), size, limit)
	}
	return nil
}

// askAgent asks one backend's host; a failure becomes the backend's error.
func (svc *Service) askAgent(ctx context.Context, ref pipeline.BackendRef, summary bool, timeout time.Duration) *gpotelv1.BackendMemoryContexts {
	out := &gpotelv1.BackendMemoryContexts{Hostname: ref.Host, SegmentId: int32(ref.SegmentID), Pid: ref.PID}
	conn, err := svc.agents.Conn(ctx, ref.Host)
	if err != nil {
		out.Error = codes.Unavailable.String() + ": " + err.Error()
		return out
	}
	cctx, cancel := context.WithTimeout(ctx, timeout+agentGrace)
	defer cancel()
	r, err := gpotelv1.NewMemoryContextsClient(conn).GetMemoryContexts(cctx,
		&gpotelv1.GetMemoryContextsRequest{Pid: ref.PID, Summary: summary, Timeout: durationpb.New(timeout)})
	if err != nil {
		st, _ := status.FromError(err)
		out.Error = st.Code().String() + ": " + st.Message()
		return out
	}
	out.Source, out.LoggedAt, out.Contexts, out.GrandTotal = r.GetSource(), r.GetLoggedAt(), r.GetContexts(), r.GetGrandTotal()
	return out
}

// rollUp sums total and used bytes by context name over the answering
// backends, largest first, each with its top backends.
func rollUp(backends []*gpotelv1.BackendMemoryContexts, top int) ([]*gpotelv1.ContextRollup, int64, bool) {
	type share struct {
		b     *gpotelv1.BackendMemoryContexts
		total int64
	}
	type acc struct {
		row    *gpotelv1.ContextRollup
		shares map[*gpotelv1.BackendMemoryContexts]int64
	}
	byName := map[string]*acc{}
	var grand int64
	partial := false
	for _, b := range backends {
		if b.GetError() != "" {
			partial = true
			continue
		}
		grand += b.GetGrandTotal().GetTotalBytes()
		for _, c := range b.GetContexts() {
			a := byName[c.GetName()]
			if a == nil {
				a = &acc{row: &gpotelv1.ContextRollup{Name: c.GetName()}, shares: map[*gpotelv1.BackendMemoryContexts]int64{}}
				byName[c.GetName()] = a
			}
			a.row.TotalBytes += c.GetTotalBytes()
			a.row.UsedBytes += c.GetUsedBytes()
			a.row.Contexts += int64(max(c.GetAggregatedContexts(), 1))
			a.shares[b] += c.GetTotalBytes()
		}
	}
	out := make([]*gpotelv1.ContextRollup, 0, len(byName))
	for _, a := range byName {
		shares := make([]share, 0, len(a.shares))
		for b, total := range a.shares {
			shares = append(shares, share{b, total})
		}
		sort.Slice(shares, func(i, j int) bool {
			if shares[i].total != shares[j].total {
				return shares[i].total > shares[j].total
			}
			return shares[i].b.GetPid() < shares[j].b.GetPid()
		})
		a.row.Backends = int32(len(shares))
		for _, sh := range shares[:min(top, len(shares))] {
			a.row.TopBackends = append(a.row.TopBackends, &gpotelv1.BackendShare{
				Hostname: sh.b.GetHostname(), SegmentId: sh.b.GetSegmentId(), Pid: sh.b.GetPid(), TotalBytes: sh.total})
		}
		out = append(out, a.row)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TotalBytes != out[j].TotalBytes {
			return out[i].TotalBytes > out[j].TotalBytes
		}
		return out[i].Name < out[j].Name
	})
	return out, grand, partial
}

// everyOf is the time between two requests at r a second.
func everyOf(r float64) time.Duration {
	return time.Duration(float64(time.Second) / r).Round(time.Millisecond)
}
