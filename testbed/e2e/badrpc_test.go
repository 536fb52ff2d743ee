package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/workload"
)

// rawCodec sends bytes as they are, so a test can put garbage where a
// protobuf message belongs; it names itself "proto" to pass as one.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*(v.(*[]byte)))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// rssBytes is the resident memory of pid from /proc/<pid>/status.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// badCall is one malformed request and the status it must get.
type badCall struct {
	name string
	want codes.Code
	call func(ctx context.Context, conn *grpc.ClientConn) error
}

// TestBadRPCsGetAClearStatus sends the agent and the API what a broken or
// hostile client would, checks each gets a clear gRPC status while normal
// calls keep being answered, and that both processes' RSS returns to its
// baseline afterwards.
func TestBadRPCsGetAClearStatus(t *testing.T) {
	needBinaries(t)
	s := startStack(t)
	w, err := workload.Start(context.Background(), s.Cluster, workload.Spec{Name: "badrpc-idle", Kind: workload.IdleInTransaction, Duration: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	api := dialAPI(t, s.API)
	waitFor(t, "the API serves the workload session", func() (bool, string) {
		st, err := stateOf(context.Background(), api, w.SessID())
		return err == nil && st != nil, fmt.Sprint(err)
	})

	const host = "sdw1"
	agentPid := s.Agents[host].PID()
	segPids := w.Pids()[0]
	garbage := make([]byte, 1<<20)
	_, _ = rand.Read(garbage)

	agentCalls := []badCall{
		{"a million pids (past the 4 MiB receive limit)", codes.ResourceExhausted, func(ctx context.Context, conn *grpc.ClientConn) error {
			req := &yagpcc.GetPidProcInfoReq{SegmentProcess: make([]*yagpcc.SegmentProcess, 1_000_000)}
			for i := range req.SegmentProcess {
				req.SegmentProcess[i] = &yagpcc.SegmentProcess{Pid: int64(i + 1)}
			}
			_, err := yagpcc.NewGetQueryInfoClient(conn).GetPidProcStat(ctx, req)
			return err
		}},
		{"10001 pids (past max_pids_per_request)", codes.InvalidArgument, func(ctx context.Context, conn *grpc.ClientConn) error {
			req := &yagpcc.GetPidProcInfoReq{SegmentProcess: make([]*yagpcc.SegmentProcess, 10_001)}
			for i := range req.SegmentProcess {
				req.SegmentProcess[i] = &yagpcc.SegmentProcess{Pid: int64(i + 1)}
			}
			_, err := yagpcc.NewGetQueryInfoClient(conn).GetPidProcStat(ctx, req)
			return err
		}},
		{"a negative pid", codes.InvalidArgument, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := yagpcc.NewGetQueryInfoClient(conn).GetPidProcStat(ctx, &yagpcc.GetPidProcInfoReq{
				SegmentProcess: []*yagpcc.SegmentProcess{{Pid: int64(segPids[0])}, {Pid: -7}}})
			return err
		}},
		{"garbage bytes as the request message", codes.Internal, func(ctx context.Context, conn *grpc.ClientConn) error {
			var reply []byte
			return conn.Invoke(ctx, "/yagpcc.GetQueryInfo/GetPidProcStat", &garbage, &reply, grpc.ForceCodecV2(rawCodec{}))
		}},
	}
	apiCalls := []badCall{
		{"a 5 MiB page token (past the 4 MiB receive limit)", codes.ResourceExhausted, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := yagpcc.NewGetGPInfoClient(conn).GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{PageToken: strings.Repeat("x", 5<<20)})
			return err
		}},
		{"a negative page size", codes.InvalidArgument, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := yagpcc.NewGetGPInfoClient(conn).GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{PageSize: -1})
			return err
		}},
		{"a page token that is not one", codes.InvalidArgument, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := yagpcc.NewGetGPInfoClient(conn).GetGPSessions(ctx, &yagpcc.GetGPSessionsReq{PageToken: "\x00garbage"})
			return err
		}},
		{"garbage bytes as the request message", codes.Internal, func(ctx context.Context, conn *grpc.ClientConn) error {
			var reply []byte
			return conn.Invoke(ctx, "/yagpcc.GetGPInfo/GetGPSessions", &garbage, &reply, grpc.ForceCodecV2(rawCodec{}))
		}},
	}
	healthy := map[string]func(context.Context) error{
		"agent": func(ctx context.Context) error {
			conn, err := grpc.NewClient(s.AgentEndpoints[host], grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return err
			}
			defer func() { _ = conn.Close() }()
			resp, err := yagpcc.NewGetQueryInfoClient(conn).GetPidProcStat(ctx, &yagpcc.GetPidProcInfoReq{
				SegmentProcess: []*yagpcc.SegmentProcess{{Pid: int64(segPids[0])}}})
			if err == nil && resp.GetSummary().GetAnswered() != 1 {
				err = fmt.Errorf("answered %d of 1", resp.GetSummary().GetAnswered())
			}
			return err
		},
		"API": func(ctx context.Context) error {
			st, err := stateOf(ctx, api, w.SessID())
			if err == nil && st == nil {
				err = errors.New("the session is gone")
			}
			return err
		},
	}
	for _, target := range []struct {
		name, endpoint, method string
		pid                    int
		calls                  []badCall
		streamReq              proto.Message
	}{
		{"agent", s.AgentEndpoints[host], "/yagpcc.GetQueryInfo/GetPidProcStat", agentPid, agentCalls,
			&yagpcc.GetPidProcInfoReq{SegmentProcess: []*yagpcc.SegmentProcess{{Pid: int64(segPids[0])}}}},
		{"API", s.API, "/yagpcc.GetGPInfo/GetGPSessions", s.Collector.PID(), apiCalls, &yagpcc.GetGPSessionsReq{ShowSystem: true}},
	} {
		t.Run(target.name, func(t *testing.T) {
			baseline, err := rssBytes(target.pid)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := grpc.NewClient(target.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			for round := 0; round < 5; round++ {
				for _, c := range target.calls {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					err := c.call(ctx, conn)
					cancel()
					if got := status.Code(err); got != c.want {
						t.Fatalf("%s: status %v (%v), want %v", c.name, got, err, c.want)
					}
					if round == 0 {
						t.Logf("%s: %v", c.name, err)
					}
				}
			}
			closed, err := garbageConnections(target.endpoint, 20)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("20 connections that sent 64 KiB of random bytes: %d closed by the server", closed)
			if closed != 20 {
				t.Errorf("%d of 20 garbage connections were left open", 20-closed)
			}
			stuck, err := neverReadingClients(target.endpoint, target.method, target.streamReq, 20, 100)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err = healthy[target.name](ctx)
			cancel()
			if err != nil {
				t.Errorf("a normal call failed while 20 clients never read: %v", err)
			}
			peak, _ := rssBytes(target.pid)
			for _, c := range stuck {
				_ = c.Close()
			}
			// The Go runtime hands freed memory back in the background: wait for it.
			limit := baseline + max(baseline/5, 16<<20)
			var now int64
			waitFor(t, target.name+" RSS back to its baseline", func() (bool, string) {
				now, err = rssBytes(target.pid)
				return err == nil && now <= limit, fmt.Sprintf("%.1f MiB, limit %.1f MiB (%v)", mib(float64(now)), mib(float64(limit)), err)
			})
			t.Logf("%s RSS: baseline %.1f MiB, with 2000 unread streams %.1f MiB, after %.1f MiB", target.name,
				mib(float64(baseline)), mib(float64(peak)), mib(float64(now)))
			ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := healthy[target.name](ctx); err != nil {
				t.Errorf("%s stopped answering after the bad calls: %v", target.name, err)
			}
		})
	}
}

// garbageConnections opens n connections that send random bytes instead of
// HTTP/2 and counts those the server closes.
func garbageConnections(endpoint string, n int) (int, error) {
	closed := 0
	junk := make([]byte, 64<<10)
	for range n {
		_, _ = rand.Read(junk)
		c, err := net.DialTimeout("tcp", endpoint, 10*time.Second)
		if err != nil {
			return closed, err
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		_, _ = c.Write(junk)
		_, err = io.Copy(io.Discard, c)
		var ne net.Error
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
			closed++ // EOF or reset: the server hung up
		}
		_ = c.Close()
	}
	return closed, nil
}

// neverReadingClients opens conns HTTP/2 connections that each start streams
// calls of method with a zero receive window and never read.
func neverReadingClients(endpoint, method string, req proto.Message, conns, streams int) ([]net.Conn, error) {
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	msg := make([]byte, 5+len(body))
	binary.BigEndian.PutUint32(msg[1:5], uint32(len(body)))
	copy(msg[5:], body)
	var hdr bytes.Buffer
	enc := hpack.NewEncoder(&hdr)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", endpoint},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	var out []net.Conn
	for range conns {
		c, err := net.DialTimeout("tcp", endpoint, 10*time.Second)
		if err != nil {
			return out, err
		}
		out = append(out, c)
		_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
			return out, err
		}
		fr := http2.NewFramer(c, c)
		if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
			return out, err
		}
		for i := range streams {
			id := uint32(2*i + 1)
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr.Bytes(), EndHeaders: true}); err != nil {
				return out, err
			}
			if err := fr.WriteData(id, true, msg); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}
