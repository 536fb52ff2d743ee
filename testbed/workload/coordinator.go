// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpotel/gpotel/testbed/cluster"
)

// coordinatorWatchPeriod bounds how long a session's segment backends
// outlive its coordinator backend.
const coordinatorWatchPeriod = 100 * time.Millisecond

// ErrCoordinatorEnded ends a session whose coordinator connection the server
// closed (pg_terminate_backend, a crash): its segment backends end with it.
var ErrCoordinatorEnded = errors.New("the server closed the coordinator connection; its segment backends ended with it")

// watchCoordinator closes the session's segment connections once the server
// has closed its coordinator connection, as Greenplum's executors exit with
// their dispatcher, and then ends the run. It looks every
// coordinatorWatchPeriod: pgx sees a closed connection only when it next
// uses it, which a session idle in a transaction does not.
func (s *Session) watchCoordinator(ctx context.Context, endRun context.CancelFunc) {
	tick := time.NewTicker(coordinatorWatchPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if s.endWithCoordinator() {
			endRun()
			return
		}
	}
}

// endWithCoordinator closes the live segment connections if the server has
// closed the coordinator's; a backend the session is closing itself is not
// the server's doing.
func (s *Session) endWithCoordinator() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	coord := s.live[cluster.CoordinatorContent]
	if coord == nil || coord.closing || !serverClosed(coord.sock) {
		return false
	}
	for _, b := range s.live {
		if b.content != cluster.CoordinatorContent {
			// The socket alone, safe beside a goroutine using the pgx
			// connection: the backend reads end of file and exits.
			_ = b.sock.Close()
		}
	}
	s.coordinatorEnded = coord.pid
	return true
}

// endedCoordinator is the pid of the coordinator backend the server ended, or 0.
func (s *Session) endedCoordinator() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.coordinatorEnded
}

// serverClosed tells whether the server has closed its end of conn, without
// reading from it, so pgx's use of the connection is undisturbed.
func serverClosed(conn socket) bool {
	raw, err := conn.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	err = raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}} // #nosec G115 -- a file descriptor
		n, err := unix.Poll(fds, 0)
		closed = err == nil && n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
	})
	return err == nil && closed
}

// socket is a backend's connection as the watch uses it: closable from any
// goroutine, its state readable without reading from it.
type socket interface {
	net.Conn
	syscall.Conn
}
