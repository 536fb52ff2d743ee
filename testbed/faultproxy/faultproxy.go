// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package faultproxy is a TCP proxy that makes the link through it slow and
// lossy, as tc netem would, for drills on machines whose kernel has no
// sch_netem: every segment (one read from a side) is delayed, a share of
// them is lost, and a lost segment either comes late, as TCP's
// retransmission brings it, or resets the connection.
package faultproxy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// segmentSize bounds one segment: about what one read of a busy socket gives.
	segmentSize = 16 << 10
	// inFlight bounds the segments one direction holds: the link's buffer.
	inFlight = 64
	// maxConns bounds the connections served at once; more are refused.
	maxConns = 256
	// dialTimeout bounds reaching the upstream.
	dialTimeout = 10 * time.Second
)

// Faults say what the link does to each segment.
type Faults struct {
	// Delay is how long every segment travels.
	Delay time.Duration
	// Loss is the share of segments lost (0..1).
	Loss float64
	// ResetShare is the share of lost segments that reset the connection;
	// the others arrive after one more round trip (2 × Delay), holding back
	// the segments behind them, as a retransmission does.
	ResetShare float64
	// Seed makes the losses repeatable.
	Seed uint64
}

func (f Faults) validate() error {
	var errs []error
	if f.Delay < 0 {
		errs = append(errs, fmt.Errorf("delay %s is negative", f.Delay))
	}
	if f.Loss < 0 || f.Loss > 1 {
		errs = append(errs, fmt.Errorf("loss %v is not a share between 0 and 1", f.Loss))
	}
	if f.ResetShare < 0 || f.ResetShare > 1 {
		errs = append(errs, fmt.Errorf("reset share %v is not a share between 0 and 1", f.ResetShare))
	}
	return errors.Join(errs...)
}

// Stats count what the proxy did.
type Stats struct {
	Connections, Refused, Segments, Retransmitted, Resets int64
}

// Proxy forwards every connection it accepts to one upstream address.
type Proxy struct {
	lis      net.Listener
	upstream string
	faults   Faults

	mu     sync.Mutex
	rng    *rand.Rand
	conns  map[*link]struct{}
	closed bool
	wg     sync.WaitGroup
	done   chan struct{}

	connections, refused, segments, retransmitted, resets atomic.Int64
}

// Start listens on listen (host:port, port 0 picks one) and forwards to upstream.
func Start(listen, upstream string, f Faults) (*Proxy, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	// A seeded generator: the same seed loses the same segments.
	rng := rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15)) //nolint:gosec // repeatable faults for a drill, no secret
	p := &Proxy{lis: lis, upstream: upstream, faults: f, rng: rng, conns: map[*link]struct{}{}, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	return Stats{Connections: p.connections.Load(), Refused: p.refused.Load(), Segments: p.segments.Load(),
		Retransmitted: p.retransmitted.Load(), Resets: p.resets.Load()}
}

// Close stops accepting, drops every connection and waits for its goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	for l := range p.conns {
		l.close()
	}
	p.mu.Unlock()
	err := p.lis.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return // closed
		}
		l := &link{client: c}
		p.mu.Lock()
		if p.closed || len(p.conns) >= maxConns {
			p.mu.Unlock()
			p.refused.Add(1)
			_ = c.Close()
			continue
		}
		p.conns[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		p.connections.Add(1)
		go p.serve(l)
	}
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	once           sync.Once
}

// close drops both sides at once.
func (l *link) close() {
	l.once.Do(func() {
		_ = l.client.Close()
		if l.server != nil {
			_ = l.server.Close()
		}
	})
}

// reset drops both sides with an RST, as a lost link does.
func (l *link) reset() {
	for _, c := range []net.Conn{l.client, l.server} {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	}
	l.close()
}

func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
	}()
	server, err := net.DialTimeout("tcp", p.upstream, dialTimeout)
	if err != nil {
		l.close()
		return
	}
	p.mu.Lock()
	l.server = server
	closed := p.closed
	p.mu.Unlock()
	if closed {
		l.close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, l.client, l.server) }()
	go func() { defer wg.Done(); p.pipe(l, l.server, l.client) }()
	wg.Wait()
	l.close()
}

// segment is what one read gave, and when it arrives.
type segment struct {
	data  []byte
	due   time.Time
	reset bool
	eof   bool
}

// pipe carries one direction: a reader stamps each segment with its fate,
// a writer delivers them in order when due.
func (p *Proxy) pipe(l *link, src, dst net.Conn) {
	queue := make(chan segment, inFlight)
	go func() {
		defer close(queue)
		for {
			buf := make([]byte, segmentSize)
			n, err := src.Read(buf)
			if n > 0 {
				queue <- p.fate(buf[:n])
			}
			if err != nil {
				queue <- segment{eof: true, due: time.Now().Add(p.faults.Delay)}
				return
			}
		}
	}()
	for s := range queue {
		if wait := time.Until(s.due); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-p.done:
				timer.Stop()
				l.close()
				continue // drain: the reader ends once src is closed
			}
		}
		switch {
		case s.reset:
			p.resets.Add(1)
			l.reset()
		case s.eof:
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			} else {
				l.close()
			}
		default:
			if _, err := dst.Write(s.data); err != nil {
				l.close()
			}
		}
	}
}

// fate decides what the link does to one segment.
func (p *Proxy) fate(data []byte) segment {
	p.segments.Add(1)
	s := segment{data: data, due: time.Now().Add(p.faults.Delay)}
	p.mu.Lock()
	lost := p.rng.Float64() < p.faults.Loss
	reset := lost && p.rng.Float64() < p.faults.ResetShare
	p.mu.Unlock()
	switch {
	case reset:
		s.reset = true
	case lost:
		p.retransmitted.Add(1)
		s.due = s.due.Add(2 * p.faults.Delay)
	}
	return s
}
