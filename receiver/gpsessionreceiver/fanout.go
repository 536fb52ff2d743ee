// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"golang.org/x/sync/errgroup"

	"github.com/gpotel/gpotel/internal/agentconn"
	"github.com/gpotel/gpotel/internal/cpuslots"
	"github.com/gpotel/gpotel/internal/kernelunits"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// procReader answers GetPidProcStat for one host: a gRPC client of its agent,
// or the agent's service in-process for a local host.
type procReader interface {
	GetPidProcStat(ctx context.Context, req *yagpcc.GetPidProcInfoReq) (*yagpcc.GetPidProcInfoResponse, error)
}

type grpcProcReader struct{ client yagpcc.GetQueryInfoClient }

func (r grpcProcReader) GetPidProcStat(ctx context.Context, req *yagpcc.GetPidProcInfoReq) (*yagpcc.GetPidProcInfoResponse, error) {
	return r.client.GetPidProcStat(ctx, req)
}

// agentDirectory keeps one long-lived reader per host: a gRPC connection
// to its agent, or the shared local reader.
type agentDirectory struct {
	agents     *agentconn.Pool
	local      localReader // nil when no local host is configured
	localHosts map[string]bool

	mu      sync.Mutex
	readers map[string]procReader
}

func newAgentDirectory(cfg *Config, host component.Host, telemetry component.TelemetrySettings, local localReader) *agentDirectory {
	var extensions map[component.ID]component.Component
	if host != nil {
		extensions = host.GetExtensions()
	}
	d := &agentDirectory{
		agents:     agentconn.NewPool(cfg.Config, extensions, telemetry, cfg.AgentMaxResponseSizeMiB<<20, agentconn.DecodeInSlots(cpuslots.Pipeline)),
		local:      local,
		localHosts: map[string]bool{},
		readers:    map[string]procReader{},
	}
	for _, h := range cfg.LocalHosts {
		d.localHosts[h] = true
	}
	return d
}

// reader returns the host's reader, connecting on first use. The connection
// is lazy: a dead agent fails its call, not this.
func (d *agentDirectory) reader(ctx context.Context, host string) (procReader, error) {
	if d.localHosts[host] && d.local != nil {
		return d.local, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.readers[host]; ok {
		return r, nil
	}
	conn, err := d.agents.Conn(ctx, host)
	if err != nil {
		return nil, err
	}
	r := grpcProcReader{client: yagpcc.NewGetQueryInfoClient(conn)}
	d.readers[host] = r
	return r, nil
}

// forget drops connections to hosts that left the topology.
func (d *agentDirectory) forget(keep map[string]bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, h := range d.agents.Forget(keep) {
		delete(d.readers, h)
	}
}

func (d *agentDirectory) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.readers)
	return d.agents.Close()
}

// hostQuery is what one host gets asked: its processes in discovery order.
type hostQuery struct {
	host  string
	procs []Backend
	// silent, when set, is why the host is not asked this scrape: it let an
	// earlier call of the same scrape run out its host_timeout, and asking
	// again would hold the snapshot back by another one.
	silent error
	// deltaClient names the receiver to the agent, followed by /<batch>;
	// empty: full answers only. since[k] is the generation of batch k's
	// last answer, received whole and sent on; 0 or absent: none.
	deltaClient string
	since       []uint64
	// carry: the host's unchanged processes are carried as a whole
	// (sparse.Outgoing.Carries).
	carry bool
}

// hostResult is one host's answer for this scrape.
type hostResult struct {
	host        string
	asked       int
	up          bool  // every call answered sanely within the host timeout, every batch accepted
	err         error // why not, when !up
	calls       int
	answered    int // processes the agent answered for in calls it answered sanely
	written     int // of them, processes written into process resources
	withoutStat int // of them, processes without a stat, so without identity
	summary     readCounts
	cgroups     hostCgroups // host pressure and the processes' control groups
	answeredAt  time.Time   // when its last sane answer came; zero: none
	cpus        uint32      // CPUs online at its last sane answer; 0: not reported
	// generations[k] is batch k's answer's delta_generation when it went
	// on whole, else 0.
	generations []uint64
	unchanged   int // processes the agents left out as unchanged
}

// agentAnswer is one sane agent answer of a host: the processes answered,
// and, of a delta answer, the asked ones it left out as unchanged.
type agentAnswer struct {
	host      string
	consts    kernelunits.Host
	infos     []*yagpcc.GpPidProcInfo
	unchanged []*Backend
	asked     map[int64]*Backend
	// carry: the host's unchanged processes are carried as a whole; then
	// leftOut counts them, and gone lists the asked pids not answered, or
	// answered without a stat (without identity: not kept).
	carry   bool
	leftOut int
	gone    []int64
}

// answerSink takes one sane agent answer of a host, as it arrives. An
// error means its processes did not reach the pipeline.
type answerSink func(ctx context.Context, a *agentAnswer) (written, withoutStat int, err error)

// throughSlots lets at most cap(slots) answers through sink at once;
// the others wait, without a deadline, as they would for the processor's
// own lock. Writing an answer's pdata and the processor's intake of it
// are most of a scrape's CPU, and the processor takes one batch at a time
// anyway: more writers would only hold more batches in memory while they
// wait for it, and keep every core busy, so that API calls queue behind
// them (docs/performance.md measures the difference). The agent calls
// themselves stay max_parallel_hosts wide.
func throughSlots(slots cpuslots.Slots, sink answerSink) answerSink {
	return func(ctx context.Context, a *agentAnswer) (int, int, error) {
		slots.Acquire()
		defer slots.Release()
		return sink(ctx, a)
	}
}

// readCounts adds up the agents' ProcReadSummary over a host's calls.
type readCounts struct {
	requested, answered, vanished, denied, failed int64
}

// fanOut asks every host in parallel (at most MaxParallelHosts at once),
// each in batches of at most MaxPidsPerCall, each host bounded by
// HostTimeout. A failing host never fails or delays the others.
// Each sane answer goes to sink at once, so no answer outlives its batch.
func fanOut(ctx context.Context, cfg *Config, dir *agentDirectory, queries []hostQuery, sink answerSink) []hostResult {
	results := make([]hostResult, len(queries))
	var g errgroup.Group
	g.SetLimit(cfg.MaxParallelHosts)
	for i := range queries {
		g.Go(func() error {
			results[i] = askHost(ctx, cfg, dir, queries[i], sink)
			return nil
		})
	}
	_ = g.Wait()
	return results
}

func askHost(ctx context.Context, cfg *Config, dir *agentDirectory, q hostQuery, sink answerSink) hostResult {
	res := hostResult{host: q.host, asked: len(q.procs), up: true}
	ctx, cancel := context.WithTimeout(ctx, cfg.HostTimeout)
	defer cancel()
	fail := func(err error) {
		res.up = false
		if res.err == nil {
			res.err = err
		}
	}
	if q.silent != nil {
		fail(fmt.Errorf("host %s: not asked for its processes: %w", q.host, q.silent))
		return res
	}
	r, err := dir.reader(ctx, q.host)
	if err != nil {
		fail(err)
		return res
	}
	for k, start := 0, 0; start < len(q.procs); k, start = k+1, start+cfg.MaxPidsPerCall {
		batch := q.procs[start:min(start+cfg.MaxPidsPerCall, len(q.procs))]
		req := &yagpcc.GetPidProcInfoReq{SegmentProcess: make([]*yagpcc.SegmentProcess, len(batch))}
		if q.deltaClient != "" {
			req.DeltaClient = q.deltaClient + "/" + strconv.Itoa(k)
			if k < len(q.since) {
				req.DeltaSince = q.since[k]
			}
		}
		asked := make(map[int64]*Backend, len(batch))
		for i := range batch {
			b := &batch[i]
			req.SegmentProcess[i] = &yagpcc.SegmentProcess{GpSegmentId: b.SegmentID, SessId: b.SessionID, Pid: b.PID}
			asked[b.PID] = b
		}
		res.calls++
		res.generations = append(res.generations, 0)
		began := time.Now()
		resp, err := r.GetPidProcStat(ctx, req)
		if err != nil {
			fail(fmt.Errorf("host %s: GetPidProcStat of %d pids failed after %v: %w", q.host, len(batch), time.Since(began).Round(time.Millisecond), err))
			break
		}
		consts, err := checkAnswer(resp, req.DeltaSince, asked)
		if err != nil {
			fail(fmt.Errorf("host %s: unusable GetPidProcStat answer: %w", q.host, err))
			break
		}
		res.answeredAt, res.cpus = time.Now(), consts.CPUs
		a := &agentAnswer{host: q.host, consts: consts, infos: resp.GetPidProcData(), asked: asked, carry: q.carry}
		switch {
		case q.carry && resp.GetDelta():
			a.gone = slices.Clip(resp.GetGonePids()) // appended to below: never into the answer
			a.leftOut = len(batch) - len(a.infos) - len(a.gone)
		case q.carry: // a full answer: what it does not answer is gone
			for _, b := range leftOut(batch, resp) {
				a.gone = append(a.gone, b.PID)
			}
		case resp.GetDelta():
			a.unchanged = leftOut(batch, resp)
			a.leftOut = len(a.unchanged)
		}
		if q.carry {
			for _, info := range a.infos {
				if info.GetProcStat() == nil {
					a.gone = append(a.gone, info.GetPid())
				}
			}
		}
		res.answered += len(a.infos) + a.leftOut
		res.unchanged += a.leftOut
		res.cgroups.add(resp, asked)
		written, withoutStat, err := sink(ctx, a)
		res.written += written
		res.withoutStat += withoutStat
		if err != nil {
			fail(fmt.Errorf("host %s: %d processes did not reach the pipeline: %w", q.host, written, err))
		} else {
			res.generations[k] = resp.GetDeltaGeneration()
		}
		s := resp.GetSummary()
		res.summary.requested += s.GetRequested()
		res.summary.answered += s.GetAnswered()
		res.summary.vanished += s.GetVanished()
		res.summary.denied += s.GetDenied()
		res.summary.failed += s.GetFailed()
	}
	return res
}

// leftOut lists the processes of a batch a delta answer left out as
// unchanged: neither answered nor gone.
func leftOut(batch []Backend, resp *yagpcc.GetPidProcInfoResponse) []*Backend {
	listed := make(map[int64]bool, len(resp.GetPidProcData())+len(resp.GetGonePids()))
	for _, info := range resp.GetPidProcData() {
		listed[info.GetPid()] = true
	}
	for _, pid := range resp.GetGonePids() {
		listed[pid] = true
	}
	out := make([]*Backend, 0, len(batch)-min(len(listed), len(batch)))
	for i := range batch {
		if !listed[batch[i].PID] {
			out = append(out, &batch[i])
		}
	}
	return out
}

// checkAnswer rejects an answer that cannot be trusted: no usable host
// constants, entries for pids that were not asked about, or a delta
// answer to a request that named no generation, or that lists a pid both
// answered and gone.
func checkAnswer(resp *yagpcc.GetPidProcInfoResponse, since uint64, asked map[int64]*Backend) (kernelunits.Host, error) {
	if resp == nil {
		return kernelunits.Host{}, errors.New("empty answer")
	}
	consts, err := kernelunits.HostFromProto(resp.GetHost())
	if err != nil {
		return kernelunits.Host{}, err
	}
	seen := make(map[int64]bool, len(resp.GetPidProcData()))
	for _, info := range resp.GetPidProcData() {
		pid := info.GetPid()
		if asked[pid] == nil {
			return kernelunits.Host{}, fmt.Errorf("answered for pid %d, which was not asked about", pid)
		}
		if seen[pid] {
			return kernelunits.Host{}, fmt.Errorf("answered twice for pid %d", pid)
		}
		seen[pid] = true
	}
	if !resp.GetDelta() {
		return consts, nil
	}
	if since == 0 {
		return kernelunits.Host{}, errors.New("a delta answer to a request that named no generation")
	}
	for _, pid := range resp.GetGonePids() {
		if asked[pid] == nil || seen[pid] {
			return kernelunits.Host{}, fmt.Errorf("pid %d listed gone, which was not asked about or is answered or listed gone before", pid)
		}
		seen[pid] = true
	}
	return consts, nil
}
