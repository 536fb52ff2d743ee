// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent"
)

// replayGenerations is how many successive answers per process are
// recorded: a process moves to its next one each tick it is chosen to
// move. A process chosen once more after the last makes the benchmark
// fail (replayAgents.exhausted), so the stated activity is what was served.
const replayGenerations = 96

// replaySeed makes the choice of moving processes the same in every run.
const replaySeed = 26

// replayAgents answers GetPidProcStat for many hosts from pre-recorded
// replies: the real agent read the fixture procfs once, and each answer is
// cut together from pre-encoded entries, so the agents cost almost no CPU
// next to the collector they feed.
type replayAgents struct {
	endpoints map[string]string
	servers   []*grpc.Server
	// entries[g][pid] is GpPidProcInfo of generation g, encoded as field 1
	// of GetPidProcInfoResponse.
	entries []map[int64][]byte
	host    []byte // field 2, the host constants

	// activity is the percentage of processes whose figures move per tick.
	activity atomic.Int64
	index    map[int64]int // pid -> its place in the recorded pids

	// deltas is the agent's memory of its last answer per client (the
	// production one, keyed by host and client); nil: the extension is
	// ignored, as yagpcc's agent does (GPOTEL_SCALE_FULL_ANSWERS=1).
	deltas *segmentagent.AnswerMemory
	// wireBytes is what the answers served took on the wire; fullBytes
	// what full answers to the same requests would have.
	wireBytes, fullBytes atomic.Int64

	mu        sync.Mutex
	calls     map[string]uint64   // per host and first pid of the batch: answers served
	gens      map[string][]uint16 // per host, each process's generation
	exhausted bool                // a process chosen to move had no generation left
	last      []byte              // the last answer served for sdw1's first batch
	cpuNS     atomic.Int64
}

// rawMessage is a gRPC message that is already encoded.
type rawMessage struct{ b []byte }

type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) ([]byte, error) {
	if m, ok := v.(*rawMessage); ok {
		return m.b, nil
	}
	return nil, fmt.Errorf("replay agent: cannot encode %T", v)
}
func (rawCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(*rawMessage)
	if !ok {
		return fmt.Errorf("replay agent: cannot decode into %T", v)
	}
	m.b = append(m.b[:0], data...)
	return nil
}

var _ encoding.Codec = rawCodec{}

func startReplayAgents(procRoot string, pids []int, hosts int) (*replayAgents, error) {
	cfg := segmentagent.NewDefaultServiceConfig()
	cfg.ProcRoot = procRoot
	cfg.AllowedUsers = []string{strconv.Itoa(os.Getuid())}
	svc, err := segmentagent.NewService(cfg, zap.NewNop(), nil)
	if err != nil {
		return nil, err
	}
	req := &yagpcc.GetPidProcInfoReq{}
	for _, pid := range pids {
		req.SegmentProcess = append(req.SegmentProcess, &yagpcc.SegmentProcess{Pid: int64(pid)})
	}
	resp, err := svc.GetPidProcStat(context.Background(), req)
	if err != nil {
		return nil, err
	}
	if len(resp.GetPidProcData()) != len(pids) {
		return nil, fmt.Errorf("replay agent: the fixture answered %d of %d pids", len(resp.GetPidProcData()), len(pids))
	}
	r := &replayAgents{endpoints: map[string]string{}, calls: map[string]uint64{}, gens: map[string][]uint16{}, index: map[int64]int{}}
	r.activity.Store(100)
	if os.Getenv("GPOTEL_SCALE_FULL_ANSWERS") == "" {
		r.deltas = segmentagent.NewAnswerMemory(4 * hosts)
	}
	for i, pid := range pids {
		r.index[int64(pid)] = i
	}
	hostBytes, err := proto.Marshal(resp.GetHost())
	if err != nil {
		return nil, err
	}
	r.host = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), hostBytes)
	for g := range replayGenerations {
		gen := map[int64][]byte{}
		for i, info := range resp.GetPidProcData() {
			p := proto.Clone(info).(*yagpcc.GpPidProcInfo)
			advance(p, g, i%5 == 0) // a busy fifth, the rest idle but switching
			b, err := proto.Marshal(p)
			if err != nil {
				return nil, err
			}
			gen[p.GetPid()] = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)
		}
		r.entries = append(r.entries, gen)
	}
	for h := 1; h <= hosts; h++ {
		host := fmt.Sprintf("sdw%d", h)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			r.Stop()
			return nil, err
		}
		srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.MaxSendMsgSize(64<<20),
			grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error { return r.serve(host, stream) }))
		go func() { _ = srv.Serve(lis) }()
		r.servers = append(r.servers, srv)
		r.endpoints[host] = lis.Addr().String()
	}
	return r, nil
}

// advance moves a recorded process g scrapes on.
func advance(p *yagpcc.GpPidProcInfo, g int, busy bool) {
	if st := p.GetProcStatus(); st != nil {
		st.VoluntaryCtxtSwitches += int64(3 * g)
	}
	if !busy {
		return
	}
	if st := p.GetProcStat(); st != nil {
		st.Utime += int64(150 * g)
		st.Stime += int64(20 * g)
		st.Minflt += int64(1000 * g)
	}
	if io := p.GetProcIo(); io != nil {
		io.ReadBytes += int64(8<<20) * int64(g)
		io.Rchar += int64(9<<20) * int64(g)
		io.Syscr += int64(1000 * g)
	}
}

// serve answers one GetPidProcStat from the recorded entries: each batch a
// host is asked gets the next generation.
func (r *replayAgents) serve(host string, stream grpc.ServerStream) error {
	began := time.Now()
	var in rawMessage
	if err := stream.RecvMsg(&in); err != nil {
		return err
	}
	var req yagpcc.GetPidProcInfoReq
	if err := proto.Unmarshal(in.b, &req); err != nil {
		return err
	}
	if len(req.GetSegmentProcess()) == 0 {
		return stream.SendMsg(&rawMessage{b: r.host})
	}
	first := req.GetSegmentProcess()[0].GetPid()
	gens := r.move(host, first, req.GetSegmentProcess())
	size := len(r.host)
	var answered []segmentagent.KeptProcess
	var gone []int64
	for i, sp := range req.GetSegmentProcess() {
		if e, ok := r.entries[gens[i]][sp.GetPid()]; ok {
			size += len(e)
			// A recorded entry differs from its pid's others by its generation alone.
			answered = append(answered, segmentagent.KeptProcess{PID: sp.GetPid(), Print: uint64(gens[i])})
		} else {
			gone = append(gone, sp.GetPid())
		}
	}
	var generation uint64
	var unchanged []bool
	if r.deltas != nil && req.GetDeltaClient() != "" {
		generation, unchanged = r.deltas.Answer(host+"/"+req.GetDeltaClient(), req.GetDeltaSince(), answered)
	}
	summary := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(len(req.GetSegmentProcess())))
	summary = protowire.AppendVarint(protowire.AppendTag(summary, 2, protowire.VarintType), uint64(len(answered)))
	full := r.answer(answered, nil, nil, 0, summary, size)
	out := full
	if generation != 0 {
		out = r.answer(answered, unchanged, gone, generation, summary, size)
	}
	r.wireBytes.Add(int64(len(out)))
	r.fullBytes.Add(int64(len(full)))
	if host == "sdw1" && first == 10_000 {
		r.mu.Lock()
		r.last = full
		r.mu.Unlock()
	}
	err := stream.SendMsg(&rawMessage{b: out})
	r.cpuNS.Add(int64(time.Since(began)))
	return err
}

// answer cuts an answer together: the entries of answered but the
// unchanged ones, the host, the summary, and, with a generation, the
// gpotel delta fields (a delta answer when unchanged is not nil).
func (r *replayAgents) answer(answered []segmentagent.KeptProcess, unchanged []bool, gone []int64,
	generation uint64, summary []byte, size int,
) []byte {
	out := make([]byte, 0, size+len(summary)+32)
	for i, p := range answered {
		if unchanged == nil || !unchanged[i] {
			out = append(out, r.entries[p.Print][p.PID]...)
		}
	}
	out = append(out, r.host...)
	out = protowire.AppendBytes(protowire.AppendTag(out, 3, protowire.BytesType), summary)
	if generation == 0 {
		return out
	}
	out = protowire.AppendVarint(protowire.AppendTag(out, 1001, protowire.VarintType), generation)
	if unchanged != nil {
		out = protowire.AppendVarint(protowire.AppendTag(out, 1002, protowire.VarintType), 1)
		for _, pid := range gone {
			out = protowire.AppendVarint(protowire.AppendTag(out, 1003, protowire.VarintType), uint64(pid))
		}
	}
	return out
}

// move picks, for this tick of the host's batch that starts at first,
// the activity's share of its processes at random (the same picks in
// every run) and moves them to their next generation; it returns every
// process's generation, in the batch's order. The first answer is
// generation 0 for all.
func (r *replayAgents) move(host string, first int64, procs []*yagpcc.SegmentProcess) []uint16 {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := host + "/" + strconv.FormatInt(first, 10)
	tick := r.calls[key]
	r.calls[key]++
	hg := r.gens[host]
	if hg == nil {
		hg = make([]uint16, len(r.index))
		r.gens[host] = hg
	}
	places := make([]int, 0, len(procs))
	for _, sp := range procs {
		if i, ok := r.index[sp.GetPid()]; ok {
			places = append(places, i)
		}
	}
	if tick > 0 {
		rng := rand.New(rand.NewPCG(replaySeed, tick<<32^uint64(crc32.ChecksumIEEE([]byte(key)))))
		moving := int(math.Round(float64(len(places)) * float64(r.activity.Load()) / 100))
		// The first moving places of a random permutation.
		for k := range moving {
			j := k + rng.IntN(len(places)-k)
			places[k], places[j] = places[j], places[k]
			if hg[places[k]] == replayGenerations-1 {
				r.exhausted = true
				continue
			}
			hg[places[k]]++
		}
	}
	out := make([]uint16, len(procs))
	for i, sp := range procs {
		if p, ok := r.index[sp.GetPid()]; ok {
			out[i] = hg[p]
		}
	}
	return out
}

// lastAnswer is the last answer served for sdw1's first batch.
func (r *replayAgents) lastAnswer() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// ranOut tells whether a process chosen to move had no generation left.
func (r *replayAgents) ranOut() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exhausted
}

// cpuShare is the wall time the replay handlers took in all, in seconds: an
// upper bound of their CPU.
func (r *replayAgents) cpuShare() float64 { return float64(r.cpuNS.Load()) / 1e9 }

func (r *replayAgents) Stop() {
	for _, s := range r.servers {
		s.Stop()
	}
}
