// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package taskstats

import (
	"errors"
	"fmt"
	"os"

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
	family uint16
}

// Dial opens a generic netlink socket and resolves the TASKSTATS family.
func Dial() (*Client, error) {
	conn, family, err := dialFamily()
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, family: family}, nil
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
	return c.get(unix.TASKSTATS_CMD_ATTR_PID, pid)
}

// Group returns what the kernel sums over thread group tgid, live and exited
// threads: CPU times, run and delay totals, context switches and elapsed
// time. Identity, I/O, faults and memory are left zero by the kernel.
func (c *Client) Group(tgid int) (*Stats, error) {
	return c.get(unix.TASKSTATS_CMD_ATTR_TGID, tgid)
}

func (c *Client) get(attr uint16, id int) (*Stats, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(attr, uint32(id)) // #nosec G115 -- pids fit in 22 bits
	m, err := c.execute(unix.TASKSTATS_CMD_GET, ae)
	if err != nil {
		return nil, fmt.Errorf("taskstats of %d: %w", id, err)
	}
	msg, err := DecodeMessage(m.Data)
	if err != nil {
		return nil, fmt.Errorf("taskstats of %d: %w", id, err)
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
