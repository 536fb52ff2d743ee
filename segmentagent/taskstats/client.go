// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package taskstats

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ErrPermission is returned when the kernel refuses taskstats: every
// TASKSTATS_CMD_GET needs CAP_NET_ADMIN.
var ErrPermission = errors.New("taskstats needs CAP_NET_ADMIN")

// Client asks the kernel for the statistics of live tasks and cgroups over
// one generic netlink socket. It is not safe for concurrent use: give each
// goroutine its own.
type Client struct {
	conn   *genetlink.Conn
	raw    syscall.RawConn
	family uint16
	seq    uint32

	requests []byte // one window of requests, sent at once
	reply    []byte // one reply datagram
	from     unix.RawSockaddrNetlink
	fromLen  uint32
	answered [maxInFlight]bool
	task     Stats // the reply being answered, decoded in place
	group    Stats
}

// Dial opens a generic netlink socket, resolves the TASKSTATS family and
// sizes the receive buffer for maxInFlight replies.
func Dial() (*Client, error) {
	conn, family, err := dialFamily()
	if err != nil {
		return nil, err
	}
	raw, err := conn.SyscallConn()
	if err == nil {
		// Above rmem_max only with CAP_NET_ADMIN (SO_RCVBUFFORCE), which taskstats needs anyway.
		err = conn.SetReadBuffer(maxInFlight * replyBudget)
	}
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("taskstats socket: %w", err)
	}
	// Our sequence numbers start far from genetlink's own (Group uses it):
	// a stale reply to one is never taken for a reply to the other.
	return &Client{conn: conn, raw: raw, family: family, seq: 1 << 31,
		requests: make([]byte, 0, maxInFlight*taskRequestLen), reply: make([]byte, maxReplySize)}, nil
}

func dialFamily() (*genetlink.Conn, uint16, error) {
	conn, err := genetlink.Dial(nil)
	if err != nil {
		return nil, 0, fmt.Errorf("generic netlink socket: %w", err)
	}
	f, err := conn.GetFamily(unix.TASKSTATS_GENL_NAME)
	if err != nil {
		_ = conn.Close()
		return nil, 0, fmt.Errorf("taskstats family: %w", err)
	}
	return conn, f.ID, nil
}

// Close releases the socket.
func (c *Client) Close() error { return c.conn.Close() }

// Task returns the full record of one task (thread) pid: CPU, I/O, faults,
// context switches, high-water memory, delays, uid and command. For a
// single-threaded process, such as a PostgreSQL backend, it is the process.
// A task that does not exist is os.ErrNotExist.
func (c *Client) Task(pid int) (*Stats, error) {
	var stats *Stats
	var err error
	c.Tasks([]int{pid}, func(_ int, s *Stats, e error) {
		if err = e; s != nil {
			stats = new(Stats)
			*stats = *s
		}
	})
	return stats, err
}

// Group returns what the kernel sums over thread group tgid, live and exited
// threads: CPU times, run and delay totals, context switches and elapsed
// time. Identity, I/O, faults and memory are left zero by the kernel.
func (c *Client) Group(tgid int) (*Stats, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(unix.TASKSTATS_CMD_ATTR_TGID, uint32(tgid)) // #nosec G115 -- pids fit in 22 bits
	m, err := c.execute(unix.TASKSTATS_CMD_GET, ae)
	if err != nil {
		return nil, fmt.Errorf("taskstats of %d: %w", tgid, err)
	}
	msg, err := DecodeMessage(m.Data)
	if err != nil {
		return nil, fmt.Errorf("taskstats of %d: %w", tgid, err)
	}
	return msg.Process(), nil
}

func (c *Client) execute(cmd uint8, ae *netlink.AttributeEncoder) (genetlink.Message, error) {
	b, err := ae.Encode()
	if err != nil {
		return genetlink.Message{}, err
	}
	msgs, err := c.conn.Execute(genetlink.Message{
		Header: genetlink.Header{Command: cmd, Version: unix.TASKSTATS_GENL_VERSION},
		Data:   b,
	}, c.family, netlink.Request)
	if err != nil {
		return genetlink.Message{}, kernelError(err)
	}
	if len(msgs) != 1 {
		return genetlink.Message{}, fmt.Errorf("%d replies to one request", len(msgs))
	}
	return msgs[0], nil
}

// kernelError maps the errno inside a netlink error to what callers test for.
func kernelError(err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w: %w", ErrPermission, err)
	case errors.Is(err, unix.ESRCH):
		return fmt.Errorf("%w: %w", os.ErrNotExist, err)
	}
	return err
}
