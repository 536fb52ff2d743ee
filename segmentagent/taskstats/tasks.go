// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package taskstats

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrNoReply is a task's error when the kernel's reply to its request never
// came: dropped because the receive buffer was full (then it also wraps
// ENOBUFS), or unreadable.
var ErrNoReply = errors.New("taskstats: no reply")

// ErrOtherTask is a task's error when the kernel's reply carries the record
// of another task than the one asked for.
var ErrOtherTask = errors.New("taskstats: a reply carries another task's record")

// maxInFlight is how many requests Tasks sends before it reads their
// replies; the receive buffer is sized to hold that many replies.
const maxInFlight = 64

// replyBudget is the receive-buffer room one reply takes: a struct taskstats
// of well under a KiB in a kernel buffer with its bookkeeping.
const replyBudget = 4096

// maxReplySize bounds one reply datagram: the largest struct taskstats the
// decoder accepts with its headers. A longer datagram is not a reply.
const maxReplySize = 2 * maxStructSize

// Netlink framing (linux/netlink.h, linux/genetlink.h).
const (
	nlmsgHeaderLen = 16
	genlHeaderLen  = 4
	taskRequestLen = nlmsgHeaderLen + genlHeaderLen + 8 // and one u32 attribute
)

// Tasks asks for the records of many tasks as Task does, maxInFlight
// requests at a time: it sends them in one write and then reads the replies,
// instead of one round trip each. answer is called once for every pids[i],
// in the order the replies come, with the record or the task's own error:
// os.ErrNotExist, ErrPermission, ErrNoReply, ErrOtherTask, or a decoding reason. The
// record is the Client's until answer returns: copy what must outlive it.
func (c *Client) Tasks(pids []int, answer func(i int, s *Stats, err error)) {
	for from := 0; from < len(pids); from += maxInFlight {
		c.window(pids[from:min(from+maxInFlight, len(pids))], func(i int, s *Stats, err error) {
			if err != nil {
				err = fmt.Errorf("taskstats of %d: %w", pids[from+i], err)
			}
			answer(from+i, s, err)
		})
	}
}

// window sends one request per pid (at most maxInFlight) and reads the
// replies. The kernel answers a request inside the write that carries it, so
// when the write returns every reply is queued or was dropped: reading stops
// at the first empty read and never waits.
func (c *Client) window(pids []int, answer func(i int, s *Stats, err error)) {
	w := inFlight{family: c.family, first: c.seq + 1, pids: pids, answered: c.answered[:len(pids)], task: &c.task, group: &c.group}
	clear(w.answered)
	c.requests = c.requests[:0]
	for i, pid := range pids {
		c.seq++
		if pid <= 0 || pid > pidMaxLimit {
			w.answered[i] = true
			answer(i, nil, fmt.Errorf("%d is not a process id", pid))
			continue
		}
		c.requests = appendTaskRequest(c.requests, c.family, c.seq, pid)
		w.pending++
	}
	var err error
	if w.pending > 0 {
		err = c.send()
	}
	noReply := ErrNoReply
	if err == nil && w.pending > 0 {
		var overrun bool
		overrun, err = c.receive(func(datagram []byte) bool {
			w.take(datagram, answer)
			return w.pending > 0
		})
		if overrun {
			noReply = fmt.Errorf("%w: %w", ErrNoReply, unix.ENOBUFS)
		}
	}
	if err != nil {
		noReply = fmt.Errorf("%w: %w", ErrNoReply, err)
	}
	for i := range pids {
		if !w.answered[i] {
			answer(i, nil, noReply)
		}
	}
}

// pidMaxLimit is PID_MAX_LIMIT on 64-bit Linux: no pid is larger.
const pidMaxLimit = 1 << 22

// inFlight is one window of requests: pids[i] was asked with sequence
// number first+i.
type inFlight struct {
	family   uint16
	first    uint32
	pids     []int
	answered []bool
	pending  int
	task     *Stats // where replies are decoded
	group    *Stats
}

// take hands every message of datagram that replies to one of the window's
// unanswered requests to answer; anything else is left alone.
func (w *inFlight) take(datagram []byte, answer func(i int, s *Stats, err error)) {
	for h, payload, rest, ok := nextReply(datagram); ok; h, payload, rest, ok = nextReply(rest) {
		i := int(h.seq - w.first) // an earlier window's sequence wraps to far beyond this one
		if i >= len(w.pids) || w.answered[i] {
			continue
		}
		w.answered[i] = true
		w.pending--
		s, err := w.reply(h, payload, w.pids[i])
		answer(i, s, err)
	}
}

// reply turns one reply message to a request for pid into its record or
// its error.
func (w *inFlight) reply(h header, payload []byte, pid int) (*Stats, error) {
	switch h.typ {
	case unix.NLMSG_ERROR:
		if len(payload) < 4 {
			return nil, fmt.Errorf("%w: error message of %d bytes", ErrMalformed, len(payload))
		}
		errno := -int32(binary.NativeEndian.Uint32(payload)) // #nosec G115 -- the kernel's negative errno
		if errno <= 0 {
			return nil, fmt.Errorf("%w: errno %d", ErrNoStats, errno)
		}
		return nil, kernelError(unix.Errno(errno))
	case w.family:
	default:
		return nil, fmt.Errorf("%w: message type %d", ErrMalformed, h.typ)
	}
	if len(payload) < genlHeaderLen || payload[0] != unix.TASKSTATS_CMD_NEW {
		return nil, fmt.Errorf("%w: not a TASKSTATS_CMD_NEW reply", ErrMalformed)
	}
	_, hasGroup, err := decodeMessage(payload[genlHeaderLen:], w.task, w.group)
	if err != nil {
		return nil, err
	}
	s := w.task
	if hasGroup {
		s = w.group
	}
	if int(s.PID) != pid {
		return nil, fmt.Errorf("%w: pid %d", ErrOtherTask, s.PID)
	}
	return s, nil
}

// header is the part of a netlink message header a reply is matched by.
type header struct {
	typ uint16
	seq uint32
}

// nextReply splits the first netlink message off a datagram: its header,
// its payload and the messages after it. ok is false at the end and at a
// header whose length does not fit the datagram (the rest is not read).
func nextReply(b []byte) (h header, payload, rest []byte, ok bool) {
	if len(b) < nlmsgHeaderLen {
		return header{}, nil, nil, false
	}
	length := int(binary.NativeEndian.Uint32(b))
	if length < nlmsgHeaderLen || length > len(b) {
		return header{}, nil, nil, false
	}
	h = header{typ: binary.NativeEndian.Uint16(b[4:]), seq: binary.NativeEndian.Uint32(b[8:])}
	next := min((length+3)&^3, len(b)) // NLMSG_ALIGN
	return h, b[nlmsgHeaderLen:length], b[next:], true
}

// appendTaskRequest appends one TASKSTATS_CMD_GET for pid: the netlink
// header (the kernel fills in our port), the generic netlink header and the
// pid attribute.
func appendTaskRequest(b []byte, family uint16, seq uint32, pid int) []byte {
	e := binary.NativeEndian
	b = e.AppendUint32(b, taskRequestLen)
	b = e.AppendUint16(b, family)
	b = e.AppendUint16(b, unix.NLM_F_REQUEST)
	b = e.AppendUint32(b, seq)
	b = e.AppendUint32(b, 0)
	b = append(b, unix.TASKSTATS_CMD_GET, unix.TASKSTATS_GENL_VERSION, 0, 0)
	b = e.AppendUint16(b, 8)
	b = e.AppendUint16(b, unix.TASKSTATS_CMD_ATTR_PID)
	return e.AppendUint32(b, uint32(pid)) // #nosec G115 -- checked: 0 < pid <= PID_MAX_LIMIT
}

// send writes the window's requests in one datagram to the kernel.
func (c *Client) send() error {
	var err error
	if rerr := c.raw.Write(func(fd uintptr) bool {
		for {
			_, err = unix.Write(int(fd), c.requests)
			if err != unix.EINTR {
				return true // never wait for the poller: an unwritable socket is an error
			}
		}
	}); rerr != nil {
		return rerr
	}
	return err
}

// receive hands every datagram queued on the socket from the kernel to
// handle until handle returns false or the queue is empty. overrun says the
// kernel dropped replies for want of room (ENOBUFS).
func (c *Client) receive(handle func(datagram []byte) bool) (overrun bool, err error) {
	rerr := c.raw.Read(func(fd uintptr) bool {
		for {
			n, errno := recvfrom(int(fd), c.reply, &c.from, &c.fromLen)
			switch {
			case errno == unix.EINTR:
				continue
			case errno == unix.ENOBUFS:
				overrun = true
				continue
			case errno == unix.EAGAIN:
				return true
			case errno != 0:
				err = errno
				return true
			case n > len(c.reply) || c.from.Pid != 0:
				continue // longer than any reply, or not from the kernel: not an answer
			}
			if !handle(c.reply[:n]) {
				return true
			}
		}
	})
	if err == nil {
		err = rerr
	}
	return overrun, err
}
