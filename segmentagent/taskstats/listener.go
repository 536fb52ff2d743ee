// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package taskstats

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ErrOverrun says the kernel dropped exit records because the socket's
// receive buffer was full (ENOBUFS): how many is unknown.
var ErrOverrun = errors.New("taskstats: listener fell behind, the kernel dropped exit records")

// Listener receives the final record of every task that exits on any CPU
// (TASKSTATS_CMD_ATTR_REGISTER_CPUMASK). It has its own socket: replies to
// queries must not interleave with exit notifications.
type Listener struct {
	conn   *genetlink.Conn
	family uint16
	cpus   string
}

// Listen registers a listener for every possible CPU. readBuffer sizes the
// socket's receive buffer (bytes; 0 keeps the system default): a burst of
// exits larger than it is lost with ErrOverrun.
func Listen(readBuffer int) (*Listener, error) {
	conn, family, err := dialFamily()
	if err != nil {
		return nil, err
	}
	l := &Listener{conn: conn, family: family, cpus: possibleCPUs()}
	if readBuffer > 0 {
		// Best effort: SO_RCVBUFFORCE needs CAP_NET_ADMIN, which registering needs anyway.
		if err := conn.SetReadBuffer(readBuffer); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("taskstats listener receive buffer: %w", err)
		}
	}
	if err := l.cpumask(unix.TASKSTATS_CMD_ATTR_REGISTER_CPUMASK); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("registering taskstats listener for cpus %s: %w", l.cpus, err)
	}
	return l, nil
}

func (l *Listener) cpumask(attr uint16) error {
	ae := netlink.NewAttributeEncoder()
	ae.String(attr, l.cpus)
	b, err := ae.Encode()
	if err != nil {
		return err
	}
	_, err = l.conn.Execute(genetlink.Message{
		Header: genetlink.Header{Command: unix.TASKSTATS_CMD_GET, Version: unix.TASKSTATS_GENL_VERSION},
		Data:   b,
	}, l.family, netlink.Request|netlink.Acknowledge)
	return kernelError(err)
}

// possibleCPUs is the kernel's cpu_possible_mask as a cpulist: a mask outside
// it is refused, one short of it misses exits on the CPUs left out.
func possibleCPUs() string {
	if b, err := os.ReadFile("/sys/devices/system/cpu/possible"); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s
		}
	}
	return "0-" + strconv.Itoa(runtime.NumCPU()-1)
}

// Run hands every decoded exit message to record and every message it had to
// skip (or ErrOverrun) to skipped, until ctx ends or the listener is closed.
// It returns nil when ctx ended, else the error that stopped it.
func (l *Listener) Run(ctx context.Context, record func(Message), skipped func(error)) error {
	stop := context.AfterFunc(ctx, func() { _ = l.conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	for {
		msgs, _, err := l.conn.Receive()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				skipped(ErrOverrun)
				continue
			}
			var opErr *netlink.OpError
			if errors.As(err, &opErr) && opErr.Op == "receive" &&
				!errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, unix.EBADF) {
				// A message the netlink layer could not unpack: skip it, keep listening.
				skipped(fmt.Errorf("%w: %w", ErrMalformed, err))
				continue
			}
			return fmt.Errorf("taskstats listener: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Command != unix.TASKSTATS_CMD_NEW {
				continue
			}
			msg, err := DecodeMessage(m.Data)
			if err != nil {
				skipped(err)
				continue
			}
			record(msg)
		}
	}
}

// Close closes the socket; the kernel forgets the listener at its next exit
// notification (a deregistering request could be answered behind exit
// records and fail validation). Call it after Run has returned.
func (l *Listener) Close() error { return l.conn.Close() }
