package sessionstateexporter

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/internal/gpsemconv"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// agentGrace is added to the backend timeout for the agent's own work
// (connecting, reading the settings) and the network.
const agentGrace = 3 * time.Second

// memoryContextsClients connects to the agents on first use, one
// connection per host, shared by every request.
type memoryContextsClients struct {
	cfg        MemoryContextsConfig
	extensions map[component.ID]component.Component
	telemetry  component.TelemetrySettings

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func (c *memoryContextsClients) endpoint(host string) string {
	if ep, ok := c.cfg.Agents[host]; ok {
		return ep
	}
	return net.JoinHostPort(host, strconv.Itoa(c.cfg.AgentPort))
}

func (c *memoryContextsClients) client(ctx context.Context, host string) (gpotelv1.MemoryContextsClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn, ok := c.conns[host]; ok {
		return gpotelv1.NewMemoryContextsClient(conn), nil
	}
	cc := c.cfg.Agent
	cc.Endpoint = c.endpoint(host)
	if t := cc.TLS; t.Insecure && (t.CertFile != "" || t.CertPem != "" || t.KeyFile != "" || t.KeyPem != "") {
		cc.TLS.Insecure = false // a client certificate means TLS, as in the gpsession receiver
	}
	conn, err := cc.ToClientConn(ctx, c.extensions, c.telemetry)
	if err != nil {
		return nil, fmt.Errorf("agent of %s at %s: %w", host, cc.Endpoint, err)
	}
	if c.conns == nil {
		c.conns = map[string]*grpc.ClientConn{}
	}
	c.conns[host] = conn
	return gpotelv1.NewMemoryContextsClient(conn), nil
}

func (c *memoryContextsClients) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, conn := range c.conns {
		_ = conn.Close()
		delete(c.conns, h)
	}
}

// sessionMemoryService answers GetSessionMemoryContexts: it asks the agent
// of every host the session's backends run on, in parallel, and rolls the
// answers up by context name.
type sessionMemoryService struct {
	gpotelv1.UnimplementedSessionMemoryContextsServer

	store   *sessionStore
	clients *memoryContextsClients
}

var _ gpotelv1.SessionMemoryContextsServer = (*sessionMemoryService)(nil)

func (svc *sessionMemoryService) GetSessionMemoryContexts(ctx context.Context, req *gpotelv1.GetSessionMemoryContextsRequest) (*gpotelv1.GetSessionMemoryContextsResponse, error) {
	key := req.GetSessionKey()
	if key == nil {
		return nil, status.Error(codes.InvalidArgument, "session_key is required")
	}
	timeout := svc.clients.cfg.Timeout
	if d := req.GetTimeout(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 || d.AsDuration() > time.Minute {
			return nil, status.Errorf(codes.InvalidArgument, "timeout %v must be between 0 and 1m", d.AsDuration())
		}
		if d.AsDuration() > 0 {
			timeout = d.AsDuration()
		}
	}
	v := svc.store.load()
	s := v.byKey[sessionKey{tmID: key.GetTmId(), sessID: key.GetSessId()}]
	if s == nil || !v.live(s) {
		return nil, status.Errorf(codes.NotFound, "session tm_id %d sess_id %d is not in the newest snapshot", key.GetTmId(), key.GetSessId())
	}
	if len(s.backends) == 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "session tm_id %d sess_id %d: the snapshot lists none of its backends (gpotel.session.info has no \"backends\")", key.GetTmId(), key.GetSessId())
	}
	backends := make([]*gpotelv1.BackendMemoryContexts, len(s.backends))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(svc.clients.cfg.MaxParallel)
	for i, ref := range s.backends {
		g.Go(func() error {
			backends[i] = svc.askAgent(gctx, ref, req.GetSummary(), timeout)
			return nil
		})
	}
	_ = g.Wait()
	resp := &gpotelv1.GetSessionMemoryContextsResponse{
		SessionKey:   key,
		SnapshotTime: timestamppb.New(v.time),
		Backends:     backends,
	}
	resp.Rollup, resp.GrandTotalBytes, resp.Partial = rollUp(backends, svc.clients.cfg.TopBackends)
	return resp, nil
}

// askAgent asks one backend's host; a failure becomes the backend's error.
func (svc *sessionMemoryService) askAgent(ctx context.Context, ref gpsemconv.BackendRef, summary bool, timeout time.Duration) *gpotelv1.BackendMemoryContexts {
	out := &gpotelv1.BackendMemoryContexts{Hostname: ref.Host, SegmentId: int32(ref.SegmentID), Pid: ref.PID}
	client, err := svc.clients.client(ctx, ref.Host)
	if err != nil {
		out.Error = codes.Unavailable.String() + ": " + err.Error()
		return out
	}
	cctx, cancel := context.WithTimeout(ctx, timeout+agentGrace)
	defer cancel()
	r, err := client.GetMemoryContexts(cctx, &gpotelv1.GetMemoryContextsRequest{Pid: ref.PID, Summary: summary, Timeout: durationpb.New(timeout)})
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
