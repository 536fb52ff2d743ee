// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/gpotel/gpotel/internal/kernelunits"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// Bounds of the statement-ends stream (docs/pipeline.md, how it ended).
const (
	// maxEnds is how many records the agent holds for the collector.
	maxEnds = 4096
	// maxEndsPerAnswer bounds one answer.
	maxEndsPerAnswer = 1024
	// maxEndMessage bounds a record's message: a database user writes it.
	maxEndMessage = 512
	// maxEndsReadBytes bounds how much log one call reads; the rest is read
	// by the next one (the answer's read_through says how far it got).
	maxEndsReadBytes = 16 << 20
	// endsRetry is how long an instance whose log could not be found waits
	// before the next try.
	endsRetry = 10 * time.Second
	// writeSlack: the logging collector writes a record shortly after the
	// backend made it; a read at t has every record made before t - writeSlack.
	writeSlack = 500 * time.Millisecond
	// startSlack: how far a record's session start (whole seconds) may be
	// from its process's start.
	startSlack = 2 * time.Second
)

// EndsService serves gpotel.v1.StatementEnds: the failed statements and
// sessions the server logs of this host's instances name. Safe for
// concurrent use.
type EndsService struct {
	gpotelv1.UnimplementedStatementEndsServer

	cfg      Config
	procRoot string
	kernel   kernelunits.Host // turns a process's start ticks into a time
	logger   *zap.Logger

	mu        sync.Mutex
	epoch     uint64
	next      uint64 // sequence of the next record
	held      []*gpotelv1.StatementEnd
	followers map[string]*endsFollower // by data directory
	ignored   uint64
	cut       uint64
}

// endsFollower follows one instance's log.
type endsFollower struct {
	in      instance
	tail    *tail
	err     error
	retryAt time.Time
}

var _ gpotelv1.StatementEndsServer = (*EndsService)(nil)

// NewEndsService follows the logs of cfg's data directories; kernel holds
// the host's boot time and clock ticks.
func NewEndsService(cfg Config, procRoot string, kernel kernelunits.Host, logger *zap.Logger) (*EndsService, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &EndsService{cfg: cfg, procRoot: procRoot, kernel: kernel, logger: logger,
		epoch: binary.LittleEndian.Uint64(b[:]) | 1, next: 1, followers: map[string]*endsFollower{}}, nil
}

// GetStatementEnds implements gpotelv1.StatementEndsServer.
func (s *EndsService) GetStatementEnds(ctx context.Context, req *gpotelv1.GetStatementEndsRequest) (*gpotelv1.GetStatementEndsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &gpotelv1.GetStatementEndsResponse{Epoch: s.epoch}
	if len(s.cfg.DataDirectories) == 0 {
		resp.Reason = "memory_contexts.data_directories is empty: no server log is read"
	} else {
		began := time.Now()
		var reasons []string
		followed, behind := 0, false
		for _, dir := range s.cfg.DataDirectories {
			open, err := s.follow(ctx, dir)
			if err != nil {
				reasons = append(reasons, err.Error())
			}
			if open {
				followed++
				behind = behind || err != nil
			}
		}
		// An instance whose log cannot be found (down, or a stderr log) does
		// not hold the others back; one that was followed and failed does.
		if followed > 0 && !behind {
			resp.ReadThroughUnixNano = began.Add(-writeSlack).UnixNano()
		}
		resp.Reason = strings.Join(reasons, "; ")
	}
	cursor := req.GetCursor()
	if req.GetEpoch() != s.epoch {
		cursor = 0
	}
	first := s.next - uint64(len(s.held)) // sequence of held[0]
	if cursor < first {
		if req.GetEpoch() == s.epoch {
			resp.Missed = first - cursor
		}
		cursor = first
	}
	limit := int(req.GetMaxRecords())
	if limit <= 0 || limit > maxEndsPerAnswer {
		limit = maxEndsPerAnswer
	}
	rest := s.held[cursor-first:]
	if len(rest) > limit {
		rest, resp.More = rest[:limit], true
	}
	resp.Records = rest
	resp.NextCursor = cursor + uint64(len(rest))
	resp.IgnoredLines, resp.CutMessages = s.ignored, s.cut
	return resp, nil
}

// follow reads one instance's log to its end, opening it first when
// needed; followed says the log was open (an error then means it was not
// read to its end).
func (s *EndsService) follow(ctx context.Context, dir string) (followed bool, err error) {
	f := s.followers[dir]
	if f == nil {
		f = &endsFollower{}
		s.followers[dir] = f
	}
	if f.tail == nil {
		if time.Now().Before(f.retryAt) {
			return false, f.err
		}
		f.err = s.open(ctx, dir, f)
		if f.err != nil {
			f.retryAt = time.Now().Add(endsRetry)
			return false, f.err
		}
	}
	f.tail.read = 0
	err = f.tail.poll(maxEndsReadBytes, func(r Record) { s.take(f.in, r) })
	if errors.Is(err, errReadLimit) {
		return true, fmt.Errorf("%s: the log grew by more than %d bytes since the previous call; the rest comes next", dir, maxEndsReadBytes)
	}
	if err != nil {
		f.tail.close()
		f.tail, f.err, f.retryAt = nil, fmt.Errorf("%s: reading the server log: %w", dir, err), time.Now().Add(endsRetry)
		return true, f.err
	}
	return true, nil
}

// open finds the instance's log and opens it at its end: records from then on.
func (s *EndsService) open(ctx context.Context, dir string, f *endsFollower) error {
	in, err := readInstance(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	conn, err := connect(ctx, s.procRoot, in, s.cfg.DatabaseUser, s.cfg.Database)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	st, err := readSettings(ctx, conn)
	if err != nil {
		return err
	}
	format, src, err := chooseLog(ctx, conn, st, in, s.procRoot)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if format.Name() == "stderr" {
		// A stderr line has no SQLSTATE, and a client can end a line in it.
		return fmt.Errorf("%s: the server logs to stderr only; statement ends need csvlog or jsonlog (or Greenplum's CSV log)", dir)
	}
	t, err := openTail(src, format, "")
	if err != nil {
		return fmt.Errorf("%s: opening the server log: %w", dir, err)
	}
	t.synced = true // it starts at the end of the file: at an entry's start
	f.in, f.tail = in, t
	s.logger.Info("following the server log for statement ends", zap.String("data_directory", dir), zap.String("log", t.name), zap.String("format", format.Name()))
	return nil
}

// take keeps a record that says how a statement or session ended, from a
// backend that can have written it.
func (s *EndsService) take(in instance, r Record) {
	end, ok := statementEndOf(r)
	if !ok {
		return
	}
	if !s.couldHaveWritten(in, r) {
		s.ignored++
		return
	}
	if len(r.Message) > maxEndMessage {
		s.cut++
	}
	end.Sequence = s.next
	s.next++
	if len(s.held) == maxEnds {
		s.held = append(s.held[:0], s.held[1:]...)
	}
	s.held = append(s.held, end)
}

// statementEndOf is the record as a statement end: an ERROR, FATAL or PANIC,
// or a lost connection (SQLSTATE class 08 at LOG), with a time; of
// Greenplum's layout, the coordinator's (seg-1) only. ok is false for any
// other record.
func statementEndOf(r Record) (*gpotelv1.StatementEnd, bool) {
	switch {
	case r.Time.IsZero() || r.PID <= 0 || len(r.SQLState) != 5:
		return nil, false
	case r.Greenplum && r.Segment != -1:
		return nil, false
	case r.Severity == "ERROR", r.Severity == "FATAL", r.Severity == "PANIC":
	case r.Severity == "LOG" && strings.HasPrefix(r.SQLState, "08"):
	default:
		return nil, false
	}
	e := &gpotelv1.StatementEnd{Pid: r.PID, SessionId: r.Session, CommandCount: max(r.CommandCount, 0), TimeUnixNano: r.Time.UnixNano(),
		Severity: r.Severity, Sqlstate: r.SQLState, Message: cutMessage(r.Message)}
	if !r.SessionStart.IsZero() {
		e.SessionStartUnixNano = r.SessionStart.UnixNano()
	}
	return e, true
}

// cutMessage bounds m to maxEndMessage bytes, not inside a character, and
// ends a cut one with "…".
func cutMessage(m string) string {
	if len(m) <= maxEndMessage {
		return m
	}
	n := maxEndMessage - len("…")
	for n > 0 && !utf8.RuneStart(m[n]) {
		n--
	}
	return m[:n] + "…"
}

// couldHaveWritten tells a record whose process, where it still lives, is
// a backend of the instance that started when the record's session did.
// A process gone by the time the log is read cannot be asked: its record
// is kept (the collector matches it to the session it saw).
func (s *EndsService) couldHaveWritten(in instance, r Record) bool {
	ps, err := readProcess(s.procRoot, r.PID)
	if err != nil || !ps.exists {
		return err == nil
	}
	if ps.ppid != in.postmasterPID {
		return false
	}
	if r.SessionStart.IsZero() || s.kernel.ClkTck <= 0 {
		return true
	}
	d := s.kernel.SinceBoot(ps.startTime).Sub(r.SessionStart)
	return d > -startSlack && d < startSlack
}
