// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package faultproxy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/gpotel/gpotel/internal/await"
)

// echoServer answers every connection with what it reads, until EOF.
func echoServer(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return lis.Addr().String()
}

func startProxy(t *testing.T, f Faults) *Proxy {
	t.Helper()
	p, err := Start("127.0.0.1:0", echoServer(t), f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// roundTrip sends payload through the proxy, half-closes, and reads the echo to EOF.
func roundTrip(t *testing.T, p *Proxy, payload []byte) ([]byte, error) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(await.Deadline(t))
	go func() {
		_, _ = c.Write(payload)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	return io.ReadAll(c)
}

func payload(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBytesPassIntactBothWays(t *testing.T) {
	p := startProxy(t, Faults{Delay: time.Millisecond})
	want := payload(t, 1<<20)
	got, err := roundTrip(t, p, want)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("echo of %d bytes: got %d bytes, equal %v, err %v", len(want), len(got), bytes.Equal(got, want), err)
	}
	if s := p.Stats(); s.Connections != 1 || s.Segments == 0 || s.Resets != 0 || s.Retransmitted != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestLostSegmentsComeLateAndInOrder: without resets, every segment is lost
// and retransmitted, and the stream is still whole and in order.
func TestLostSegmentsComeLateAndInOrder(t *testing.T) {
	p := startProxy(t, Faults{Delay: time.Millisecond, Loss: 1, ResetShare: 0, Seed: 7})
	want := payload(t, 256<<10)
	got, err := roundTrip(t, p, want)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("got %d of %d bytes intact %v, err %v", len(got), len(want), bytes.Equal(got, want), err)
	}
	if s := p.Stats(); s.Retransmitted != s.Segments || s.Resets != 0 {
		t.Errorf("every segment should be retransmitted: %+v", s)
	}
}

func TestALossThatResetsEndsTheConnection(t *testing.T) {
	p := startProxy(t, Faults{Delay: time.Millisecond, Loss: 1, ResetShare: 1, Seed: 7})
	_, err := roundTrip(t, p, payload(t, 4096))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after a reset: %v, want ECONNRESET", err)
	}
	if s := p.Stats(); s.Resets == 0 {
		t.Errorf("no reset counted: %+v", s)
	}
}

// TestCloseDropsOpenConnections: a client whose segments are held for an
// hour is dropped by Close, which returns once every goroutine ended.
func TestCloseDropsOpenConnections(t *testing.T) {
	p, err := Start("127.0.0.1:0", echoServer(t), Faults{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	await.Until(t, "the proxy holds the segment", func() bool { return p.Stats().Segments == 1 })
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("close: %v", err)
		}
	case <-await.Context(t).Done():
		t.Fatal("Close did not return")
	}
	_ = c.SetReadDeadline(await.Deadline(t))
	if n, err := c.Read(make([]byte, 8)); err == nil {
		t.Errorf("read %d bytes from a closed proxy", n)
	}
}

func TestBadFaultsAreRefused(t *testing.T) {
	_, err := Start("127.0.0.1:0", "127.0.0.1:1", Faults{Delay: -time.Second, Loss: 2, ResetShare: -1})
	if err == nil {
		t.Fatal("accepted a negative delay and shares outside 0..1")
	}
	for _, want := range []string{"delay", "loss", "reset share"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("%q does not name %s", err, want)
		}
	}
}
