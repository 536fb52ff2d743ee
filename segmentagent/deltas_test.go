// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/segmentagent/procfixture"
)

// deltaHost is a procfs fixture of a few backends that a test moves,
// ends and starts again, read by the production Service.
type deltaHost struct {
	t    *testing.T
	root string
	uid  int
}

var deltaPids = []int64{3001, 3002, 3003, 3004}

func newDeltaHost(t *testing.T) *deltaHost {
	h := &deltaHost{t: t, root: t.TempDir(), uid: os.Getuid()}
	pids := make([]int, len(deltaPids))
	for i, p := range deltaPids {
		pids[i] = int(p)
	}
	require.NoError(t, procfixture.Write(h.root, pids, h.uid))
	return h
}

func (h *deltaHost) service(mutate ...func(*ServiceConfig)) *Service {
	cfg := ServiceConfig{ProcRoot: h.root, AllowedUsers: []string{strconv.Itoa(h.uid)},
		PostmasterPidFiles: []string{procfixture.PostmasterPidFile(h.root)}, Hostname: "sdw1"}
	cfg.Cgroups.Disabled = true
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := NewService(cfg, nil, nil)
	require.NoError(h.t, err)
	return s
}

// write writes p afresh (its files are read-only, as the kernel's).
func (h *deltaHost) write(p procfixture.Process) {
	p.UID = h.uid
	require.NoError(h.t, os.RemoveAll(filepath.Join(h.root, strconv.Itoa(p.PID))))
	require.NoError(h.t, procfixture.WriteProcesses(h.root, []procfixture.Process{p}))
}

// end makes a process exit.
func (h *deltaHost) end(pid int64) {
	require.NoError(h.t, os.RemoveAll(filepath.Join(h.root, strconv.FormatInt(pid, 10))))
}

// ask asks s for every deltaPid as client, naming since.
func ask(t *testing.T, s *Service, client string, since uint64) *yagpcc.GetPidProcInfoResponse {
	t.Helper()
	req := request(deltaPids...)
	req.DeltaClient, req.DeltaSince = client, since
	resp, err := s.GetPidProcStat(context.Background(), req)
	require.NoError(t, err)
	return resp
}

// A client that names the generation of the last answer it got gets only
// the processes whose entry changed since, the requested pids not
// answered, and a new generation; every tick's answer is exactly that.
func TestAgentLeavesOutWhatDidNotChangeSinceTheNamedGeneration(t *testing.T) {
	h := newDeltaHost(t)
	s := h.service()
	first := ask(t, s, "c", 0)
	assert.False(t, first.Delta, "tick 1: nothing named, a full answer")
	assert.Equal(t, deltaPids, answeredPids(first))
	require.NotZero(t, first.DeltaGeneration)

	second := ask(t, s, "c", first.DeltaGeneration)
	assert.True(t, second.Delta, "tick 2: nothing moved")
	assert.Empty(t, answeredPids(second))
	assert.Empty(t, second.GonePids)
	assert.NotEqual(t, first.DeltaGeneration, second.DeltaGeneration)
	assert.Equal(t, &yagpcc.ProcReadSummary{Requested: 4, Answered: 4}, second.Summary, "the summary counts as a full answer would")

	h.write(procfixture.Process{PID: 3002, UTime: 99_999})
	h.end(3004)
	third := ask(t, s, "c", second.DeltaGeneration)
	assert.True(t, third.Delta)
	assert.Equal(t, []int64{3002}, answeredPids(third), "tick 3: 3002 moved")
	assert.Equal(t, []int64{3004}, third.GonePids, "tick 3: 3004 exited")

	h.write(procfixture.Process{PID: 3004})
	fourth := ask(t, s, "c", third.DeltaGeneration)
	assert.True(t, fourth.Delta)
	assert.Equal(t, []int64{3004}, answeredPids(fourth), "tick 4: 3004 is back, new to the last answer")
	assert.Empty(t, fourth.GonePids)
}

// Lost answer: the client never got generation g+1 and names g. The
// agent keeps only the last generation per client, so any other name
// gets a full answer; the client then names that answer's, and deltas resume.
func TestAnAnswerTheClientDidNotGetGivesAFullAnswer(t *testing.T) {
	h := newDeltaHost(t)
	s := h.service()
	g := ask(t, s, "c", 0).DeltaGeneration
	lost := ask(t, s, "c", g)
	require.True(t, lost.Delta)
	again := ask(t, s, "c", g)
	assert.False(t, again.Delta, "g named after g+1 was given: full")
	assert.Equal(t, deltaPids, answeredPids(again))
	assert.True(t, ask(t, s, "c", again.DeltaGeneration).Delta, "the full answer's generation named: a delta again")
	assert.False(t, ask(t, s, "c", 12345).Delta, "a generation never given: full")
}

// Agent restart: the new agent keeps nothing, so whatever the client names
// gets a full answer.
func TestAnAgentRestartGivesAFullAnswer(t *testing.T) {
	h := newDeltaHost(t)
	before := h.service()
	g := ask(t, before, "c", 0).DeltaGeneration
	require.True(t, ask(t, before, "c", g).Delta)
	after := h.service()
	resp := ask(t, after, "c", g+1)
	assert.False(t, resp.Delta)
	assert.Equal(t, deltaPids, answeredPids(resp))
	resp = ask(t, after, "c", g)
	assert.False(t, resp.Delta)
}

// Collector restart: the new collector names no generation (or another
// client's name) and gets a full answer; another client's generation
// names nothing for this one.
func TestACollectorRestartGivesAFullAnswer(t *testing.T) {
	h := newDeltaHost(t)
	s := h.service()
	g := ask(t, s, "run1/0", 0).DeltaGeneration
	assert.False(t, ask(t, s, "run2/0", 0).Delta)
	assert.False(t, ask(t, s, "run3/0", g).Delta, "another client's generation")
	assert.False(t, ask(t, s, "run1/0", 0).Delta, "the same name naming nothing")
}

// A pid reused between two answers (same pid, a later start time, the
// same counters) is a new process: it is in the delta answer.
func TestAReusedPidIsAnsweredAsChanged(t *testing.T) {
	h := newDeltaHost(t)
	s := h.service()
	g := ask(t, s, "c", 0).DeltaGeneration
	h.end(3003)
	h.write(procfixture.Process{PID: 3003, StartTime: 50000 + 3003 + 777})
	resp := ask(t, s, "c", g)
	assert.True(t, resp.Delta)
	assert.Equal(t, []int64{3003}, answeredPids(resp))
}

// The same pid now asked for in another session is answered: the entry
// carries the session, and the collector keeps processes by session.
func TestAProcessAskedInAnotherSessionIsAnsweredAsChanged(t *testing.T) {
	h := newDeltaHost(t)
	s := h.service()
	g := ask(t, s, "c", 0).DeltaGeneration
	req := request(deltaPids...)
	req.SegmentProcess[1].SessId = 8
	req.DeltaClient, req.DeltaSince = "c", g
	resp, err := s.GetPidProcStat(context.Background(), req)
	require.NoError(t, err)
	assert.True(t, resp.Delta)
	assert.Equal(t, []int64{3002}, answeredPids(resp))
}

// A client without the extension (yagpcc's) names no client: it gets full
// answers, no generation, and costs the agent no memory.
func TestAClientWithoutTheExtensionGetsFullAnswersAndIsNotKept(t *testing.T) {
	h := newDeltaHost(t)
	s := h.service()
	for range 3 {
		resp := ask(t, s, "", 0)
		assert.False(t, resp.Delta)
		assert.Zero(t, resp.DeltaGeneration)
		assert.Equal(t, deltaPids, answeredPids(resp))
	}
	assert.Zero(t, s.deltas.clientCount())
}

// Hostile clients: the agent keeps answers for at most delta_clients
// clients, forgetting the least recently served (which then gets a full
// answer); a client name past MaxDeltaClientName is refused.
func TestAgentKeepsAnswersForAtMostDeltaClients(t *testing.T) {
	h := newDeltaHost(t)
	s := h.service(func(c *ServiceConfig) { c.DeltaClients = 2 })
	ga := ask(t, s, "a", 0).DeltaGeneration
	gb := ask(t, s, "b", 0).DeltaGeneration
	ga = ask(t, s, "a", ga).DeltaGeneration // a served after b
	ask(t, s, "c", 0)                       // evicts b, the least recently served
	assert.Equal(t, 2, s.deltas.clientCount())
	assert.False(t, ask(t, s, "b", gb).Delta, "b was forgotten")
	assert.Equal(t, 2, s.deltas.clientCount())
	for i := range 100 {
		ask(t, s, "x"+strconv.Itoa(i), 0)
	}
	assert.Equal(t, 2, s.deltas.clientCount(), "a hundred clients keep two")
	_ = ga

	req := request(deltaPids...)
	req.DeltaClient = strings.Repeat("n", MaxDeltaClientName+1)
	_, err := s.GetPidProcStat(context.Background(), req)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
}

// What the agent keeps per process is stated: a pid and a fingerprint,
// in a slice the size of the answer.
func TestAgentKeepsSixteenBytesPerAnsweredProcess(t *testing.T) {
	assert.Equal(t, 16, KeptBytesPerProcess)
	m := NewAnswerMemory(1)
	m.Answer("c", 0, make([]KeptProcess, 1000))
	assert.Equal(t, 1000, cap(m.clients["c"].kept))
}

// A delta answer lists each session's control groups, of its unchanged
// processes too, and a process moved to another group is answered: the
// fingerprint holds the group by what it is, not by its index.
func TestADeltaAnswerListsEachSessionsGroupsAndAMovedProcess(t *testing.T) {
	root := cgroupFixture(t)
	s := fixtureService(t, func(c *ServiceConfig) { c.ProcRoot = root })
	req := request(1001, 1002, 1003)
	req.DeltaClient = "c"
	full, err := s.GetPidProcStat(context.Background(), req)
	require.NoError(t, err)
	var groups []uint32
	for _, p := range full.PidProcData {
		require.NotNil(t, p.ControlGroup, "pid %d", p.GetPid())
		if !slices.Contains(groups, p.GetControlGroup()) {
			groups = append(groups, p.GetControlGroup())
		}
	}
	req.DeltaSince = full.DeltaGeneration
	delta, err := s.GetPidProcStat(context.Background(), req)
	require.NoError(t, err)
	require.True(t, delta.Delta)
	assert.Empty(t, answeredPids(delta))
	require.Len(t, delta.SessionControlGroups, 1)
	assert.Equal(t, int64(7), delta.SessionControlGroups[0].GetSessId())
	assert.ElementsMatch(t, groups, delta.SessionControlGroups[0].GetControlGroups())
	assert.Len(t, delta.ControlGroups, len(full.ControlGroups), "every answered process's group, unchanged ones' too")

	require.NoError(t, os.WriteFile(filepath.Join(root, "1002", "cgroup"), []byte("0::/gpdb.service/6437\n"), 0o644))
	req.DeltaSince = delta.DeltaGeneration
	moved, err := s.GetPidProcStat(context.Background(), req)
	require.NoError(t, err)
	assert.True(t, moved.Delta)
	assert.Equal(t, []int64{1002}, answeredPids(moved))
}

// delta_clients is bounded: a negative count, or one past MaxDeltaClients.
func TestDeltaClientsIsBounded(t *testing.T) {
	for _, n := range []int{-1, MaxDeltaClients + 1} {
		cfg := NewDefaultServiceConfig()
		cfg.DeltaClients = n
		assert.Error(t, cfg.Validate(), "delta_clients %d", n)
	}
	cfg := NewDefaultServiceConfig()
	cfg.DeltaClients = MaxDeltaClients
	assert.NoError(t, cfg.Validate())
}

// BenchmarkDeltaAnswer is what keeping and comparing the last answer costs
// the agent: 1000 fixture processes read in-process, in full (no client)
// and as delta answers to a client that names its last generation,
// nothing moving (every process fingerprinted, compared, left out).
func BenchmarkDeltaAnswer(b *testing.B) {
	root := procfixture.TempRoot(b)
	pids := make([]int, 1000)
	req := &yagpcc.GetPidProcInfoReq{}
	for i := range pids {
		pids[i] = 200000 + i
		req.SegmentProcess = append(req.SegmentProcess, &yagpcc.SegmentProcess{SessId: int64(i % 50), Pid: int64(pids[i])})
	}
	require.NoError(b, procfixture.Write(root, pids, os.Getuid()))
	cfg := ServiceConfig{ProcRoot: root, AllowedUsers: []string{strconv.Itoa(os.Getuid())},
		PostmasterPidFiles: []string{procfixture.PostmasterPidFile(root)}, ReadParallelism: 1}
	cfg.Cgroups.Disabled = true
	s, err := NewService(cfg, nil, nil)
	require.NoError(b, err)
	for _, delta := range []bool{false, true} {
		b.Run(map[bool]string{false: "full", true: "delta"}[delta], func(b *testing.B) {
			var since uint64
			for range b.N {
				if delta {
					req.DeltaClient, req.DeltaSince = "bench", since
				}
				resp, err := s.GetPidProcStat(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				since = resp.DeltaGeneration
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pids)), "ns/process")
		})
	}
}
