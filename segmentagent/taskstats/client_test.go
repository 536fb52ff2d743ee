// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package taskstats

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// testFamily stands for the TASKSTATS family id the kernel assigned.
const testFamily = 27

// replyMessage frames payload as the kernel frames a reply: netlink header
// with the request's sequence number, then payload, padded to 4 bytes.
func replyMessage(typ uint16, seq uint32, payload []byte) []byte {
	b := binary.NativeEndian.AppendUint32(nil, uint32(nlmsgHeaderLen+len(payload))) // #nosec G115 -- test sizes
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, 0)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 1234)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// taskRecordReply is the kernel's TASKSTATS_CMD_NEW reply to a request for pid.
func taskRecordReply(tb testing.TB, seq uint32, pid uint32) []byte {
	stats := rawStats(16, 560)
	binary.NativeEndian.PutUint32(stats[offPID:], pid)
	payload := append([]byte{unix.TASKSTATS_CMD_NEW, unix.TASKSTATS_GENL_VERSION, 0, 0}, exitMessage(tb, stats)...)
	return replyMessage(testFamily, seq, payload)
}

// errorReply is the kernel's NLMSG_ERROR answer to a request.
func errorReply(seq uint32, errno unix.Errno) []byte {
	payload := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno))) // #nosec G115 -- the kernel's negative errno
	payload = append(payload, make([]byte, nlmsgHeaderLen)...)              // the request's header, echoed
	return replyMessage(unix.NLMSG_ERROR, seq, payload)
}

// answers collects what a window hands out, by the pid's index.
type answers map[int]struct {
	PID uint32
	Err error
}

func newWindow(first uint32, pids ...int) (*inFlight, answers, func(int, *Stats, error)) {
	w := &inFlight{family: testFamily, first: first, pids: pids, answered: make([]bool, len(pids)), pending: len(pids),
		task: new(Stats), group: new(Stats)}
	got := answers{}
	return w, got, func(i int, s *Stats, err error) {
		if _, twice := got[i]; twice {
			panic("a pid answered twice")
		}
		a := got[i]
		a.Err = err
		if s != nil {
			a.PID = s.PID
		}
		got[i] = a
	}
}

func TestRepliesAreMatchedBySequenceNotByOrder(t *testing.T) {
	w, got, answer := newWindow(100, 4001, 4002, 4003)
	var datagram []byte
	datagram = append(datagram, taskRecordReply(t, 102, 4003)...)
	datagram = append(datagram, taskRecordReply(t, 99, 3999)...) // an earlier window's
	datagram = append(datagram, taskRecordReply(t, 100, 4001)...)
	datagram = append(datagram, taskRecordReply(t, 102, 4003)...) // a duplicate
	w.take(datagram, answer)
	if len(got) != 2 || got[0].PID != 4001 || got[2].PID != 4003 || got[0].Err != nil || got[2].Err != nil {
		t.Fatalf("answers %+v", got)
	}
	if w.pending != 1 || w.answered[1] {
		t.Fatalf("pid 4002 must still be pending: pending %d, answered %v", w.pending, w.answered)
	}
}

func TestKernelErrorsAreThePidsOwn(t *testing.T) {
	w, got, answer := newWindow(7, 4001, 4002, 4003)
	for _, m := range [][]byte{errorReply(7, unix.ESRCH), errorReply(8, unix.EPERM), errorReply(9, unix.EINVAL)} {
		w.take(m, answer)
	}
	if !errors.Is(got[0].Err, os.ErrNotExist) || !errors.Is(got[1].Err, ErrPermission) || !errors.Is(got[2].Err, unix.EINVAL) {
		t.Fatalf("answers %+v", got)
	}
}

func TestAReplyCarryingAnotherPidsRecordIsRefused(t *testing.T) {
	w, got, answer := newWindow(1, 4001)
	w.take(taskRecordReply(t, 1, 4242), answer)
	if !errors.Is(got[0].Err, ErrOtherTask) || got[0].PID != 0 {
		t.Fatalf("answers %+v", got)
	}
}

func TestAMessageOfAnotherTypeOrCommandIsRefused(t *testing.T) {
	w, got, answer := newWindow(1, 4001, 4002)
	w.take(replyMessage(testFamily+1, 1, nil), answer)
	w.take(replyMessage(testFamily, 2, []byte{unix.TASKSTATS_CMD_GET, 1, 0, 0}), answer)
	if !errors.Is(got[0].Err, ErrMalformed) || !errors.Is(got[1].Err, ErrMalformed) {
		t.Fatalf("answers %+v", got)
	}
}

func TestAHeaderLongerThanTheDatagramEndsIt(t *testing.T) {
	w, got, answer := newWindow(1, 4001, 4002)
	good := taskRecordReply(t, 1, 4001)
	cut := taskRecordReply(t, 2, 4002)
	w.take(append(good, cut[:len(cut)/2]...), answer)
	if len(got) != 1 || got[0].PID != 4001 || w.pending != 1 {
		t.Fatalf("answers %+v, pending %d", got, w.pending)
	}
}

// FuzzWindowTake: any datagram answers each pid of the window at most once,
// with a record of that very pid or an error, never a panic.
func FuzzWindowTake(f *testing.F) {
	f.Add(taskRecordReply(f, 10, 4001))
	f.Add(append(taskRecordReply(f, 11, 4002), errorReply(10, unix.ESRCH)...))
	f.Add(errorReply(12, unix.EPERM))
	f.Add(replyMessage(testFamily, 10, []byte{unix.TASKSTATS_CMD_NEW, 1, 0, 0}))
	f.Add(taskRecordReply(f, 10, 4001)[:100])
	f.Fuzz(func(t *testing.T, datagram []byte) {
		pids := []int{4001, 4002, 4003}
		w, got, answer := newWindow(10, pids...)
		w.take(datagram, answer)
		for i, a := range got {
			if (a.Err == nil) == (a.PID == 0) || a.Err == nil && int(a.PID) != pids[i] {
				t.Fatalf("pid %d answered %+v", pids[i], a)
			}
		}
		if w.pending != len(pids)-len(got) {
			t.Fatalf("pending %d after %d answers", w.pending, len(got))
		}
	})
}
