// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"sync"
	"unsafe"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// MaxDeltaClientName bounds GetPidProcInfoReq.delta_client, in bytes.
const MaxDeltaClientName = 64

// KeptProcess is what the agent keeps of one process it answered a client:
// its pid and a fingerprint of the entry it sent.
type KeptProcess struct {
	PID   int64
	Print uint64
}

// KeptBytesPerProcess is what AnswerMemory keeps per process a client was
// answered for: a KeptProcess, in a slice sized to the answer.
const KeptBytesPerProcess = int(unsafe.Sizeof(KeptProcess{}))

// AnswerMemory is the agent's memory of the last answer it gave each
// client (docs/pipeline.md, the agent leaves out what did not change): one
// generation and the fingerprints of the processes it answered, for at
// most a fixed number of clients, the least recently served forgotten
// first. A client is only ever answered relative to its last generation:
// any other (a lost answer, a restart on either side) gets a full answer.
// It is safe for concurrent use.
type AnswerMemory struct {
	maxClients int

	mu      sync.Mutex
	clients map[string]*clientAnswer
	served  uint64 // counts answers, to tell the least recently served
}

type clientAnswer struct {
	generation uint64
	served     uint64
	kept       []KeptProcess // by pid
}

// NewAnswerMemory keeps answers for at most maxClients clients.
func NewAnswerMemory(maxClients int) *AnswerMemory {
	return &AnswerMemory{maxClients: max(maxClients, 1), clients: map[string]*clientAnswer{}}
}

// Answer records that client is answered now for the processes answered,
// which replaces what was kept for it. When since is the client's last
// generation, unchanged[i] tells whether answered[i] has the fingerprint
// it had then (a pid answered then with another fingerprint, or not
// answered then, is changed); otherwise unchanged is nil: a full answer.
// The generation returned is the one the client names next time.
func (m *AnswerMemory) Answer(client string, since uint64, answered []KeptProcess) (generation uint64, unchanged []bool) {
	kept := make([]KeptProcess, len(answered)) // exactly: KeptBytesPerProcess each
	copy(kept, answered)
	slices.SortFunc(kept, func(a, b KeptProcess) int { return cmp.Compare(a.PID, b.PID) })
	m.mu.Lock()
	defer m.mu.Unlock()
	m.served++
	c := m.clients[client]
	if c == nil {
		if len(m.clients) >= m.maxClients {
			m.evictLeastRecent()
		}
		c = &clientAnswer{generation: rand.Uint64()} // #nosec G404 -- a name, not a secret
		m.clients[client] = c
	} else if since != 0 && since == c.generation {
		unchanged = make([]bool, len(answered))
		for i, p := range answered {
			if at, ok := slices.BinarySearchFunc(c.kept, p.PID, func(k KeptProcess, pid int64) int { return cmp.Compare(k.PID, pid) }); ok {
				unchanged[i] = c.kept[at].Print == p.Print
			}
		}
	}
	c.generation++
	if c.generation == 0 { // 0 names no answer
		c.generation++
	}
	c.served, c.kept = m.served, kept
	return c.generation, unchanged
}

// evictLeastRecent forgets the client served longest ago.
func (m *AnswerMemory) evictLeastRecent() {
	var oldest string
	at := uint64(1<<64 - 1)
	for name, c := range m.clients {
		if c.served < at {
			oldest, at = name, c.served
		}
	}
	delete(m.clients, oldest)
}

// clients is how many clients are kept (tests).
func (m *AnswerMemory) clientCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.clients)
}

// leaveOutUnchanged turns a full answer to a client that named one into a
// delta answer when the memory allows: it leaves out every process whose
// entry is the one the client got at delta_since, lists the requested pids
// not answered, and each session's groups.
func (s *Service) leaveOutUnchanged(req *yagpcc.GetPidProcInfoReq, resp *yagpcc.GetPidProcInfoResponse) {
	answered := make([]KeptProcess, len(resp.PidProcData))
	sc := s.prints.Get().(*printScratch)
	for i, info := range resp.PidProcData {
		answered[i] = KeptProcess{PID: info.GetPid(), Print: sc.fingerprint(s.printSeed, info, resp.ControlGroups)}
	}
	s.prints.Put(sc)
	generation, unchanged := s.deltas.Answer(req.GetDeltaClient(), req.GetDeltaSince(), answered)
	resp.DeltaGeneration = generation
	if unchanged == nil {
		return
	}
	resp.Delta = true
	resp.SessionControlGroups = sessionGroups(resp)
	isAnswered := make(map[int64]bool, len(resp.PidProcData))
	for _, info := range resp.PidProcData {
		isAnswered[info.GetPid()] = true
	}
	for _, p := range req.GetSegmentProcess() {
		if pid := p.GetPid(); !isAnswered[pid] {
			isAnswered[pid] = true // listed once
			resp.GonePids = append(resp.GonePids, pid)
		}
	}
	kept := resp.PidProcData[:0]
	for i, info := range resp.PidProcData {
		if !unchanged[i] {
			kept = append(kept, info)
		}
	}
	clear(resp.PidProcData[len(kept):])
	resp.PidProcData = kept
}

// sessionGroups lists, per session, the groups of its answered processes.
func sessionGroups(resp *yagpcc.GetPidProcInfoResponse) []*yagpcc.SessionControlGroups {
	var out []*yagpcc.SessionControlGroups
	at := map[int64]int{}
	for _, info := range resp.PidProcData {
		if info.ControlGroup == nil {
			continue
		}
		i, ok := at[info.GetSessId()]
		if !ok {
			i = len(out)
			at[info.GetSessId()] = i
			out = append(out, &yagpcc.SessionControlGroups{SessId: info.GetSessId()})
		}
		if g := info.GetControlGroup(); !slices.Contains(out[i].ControlGroups, g) {
			out[i].ControlGroups = append(out[i].ControlGroups, g)
		}
	}
	return out
}

// printScratch is one goroutine's buffer for fingerprints.
type printScratch struct{ buf []byte }

// fingerprint hashes everything an entry says, its group by what the
// group is rather than by its index in this answer's list (a 64-bit hash
// with a per-run random seed: a change goes unseen with odds of 2^-64).
func (sc *printScratch) fingerprint(seed maphash.Seed, info *yagpcc.GpPidProcInfo, groups []*gpotelv1.ControlGroup) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	group := info.ControlGroup
	info.ControlGroup = nil
	sc.buf = slices.Grow(sc.buf[:0], info.SizeVT())[:info.SizeVT()]
	n, err := info.MarshalToSizedBufferVT(sc.buf)
	info.ControlGroup = group
	if err != nil {
		return rand.Uint64() // #nosec G404 -- unlike any other: the entry is sent
	}
	_, _ = h.Write(sc.buf[len(sc.buf)-n:])
	if group != nil && int(*group) < len(groups) {
		g := groups[*group]
		var b [16]byte
		binary.LittleEndian.PutUint64(b[0:], uint64(g.GetVersion()))          // #nosec G115 -- bits
		binary.LittleEndian.PutUint64(b[8:], uint64(g.GetResourceGroupOid())) // #nosec G115 -- bits
		_, _ = h.Write(b[:])
		_, _ = h.WriteString(g.GetHierarchy())
		_ = h.WriteByte(0)
		_, _ = h.WriteString(g.GetPath())
	}
	return h.Sum64()
}
