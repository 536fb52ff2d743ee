// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"fmt"
	"sync"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

// StatsClient asks the kernel for cgroup v1 task states over the TASKSTATS
// generic netlink family. It is safe for concurrent use.
type StatsClient struct {
	mu     sync.Mutex
	conn   *genetlink.Conn
	family genetlink.Family
}

// DialStats opens the netlink socket and looks the TASKSTATS family up.
func DialStats() (*StatsClient, error) {
	conn, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("generic netlink: %w", err)
	}
	family, err := conn.GetFamily(taskstatsFamily)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("generic netlink family %s: %w", taskstatsFamily, err)
	}
	return &StatsClient{conn: conn, family: family}, nil
}

// Close releases the socket.
func (c *StatsClient) Close() error { return c.conn.Close() }

// TaskStates counts the tasks directly in the cgroup v1 directory dir. The
// kernel refuses (EINVAL) a directory that is not of a v1 hierarchy.
func (c *StatsClient) TaskStates(dir string) (TaskStates, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return TaskStates{}, err
	}
	defer unix.Close(fd) //nolint:errcheck // read-only directory descriptor
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(cgroupstatsCmdAttrFD, uint32(fd)) //nolint:gosec // an open fd is non-negative
	attrs, err := ae.Encode()
	if err != nil {
		return TaskStates{}, err
	}
	req := genetlink.Message{
		Header: genetlink.Header{Command: cgroupstatsCmdGet, Version: c.family.Version},
		Data:   attrs,
	}
	c.mu.Lock()
	msgs, err := c.conn.Execute(req, c.family.ID, netlink.Request)
	c.mu.Unlock()
	if err != nil {
		return TaskStates{}, fmt.Errorf("CGROUPSTATS_CMD_GET: %w", err)
	}
	if len(msgs) != 1 {
		return TaskStates{}, kerneltext.ShapeError("cgroupstats: %d replies, want 1", len(msgs))
	}
	return DecodeCgroupStats(msgs[0].Data)
}
