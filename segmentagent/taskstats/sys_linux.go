// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package taskstats

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// recvfrom reads one datagram without waiting and says who sent it. With
// MSG_TRUNC n is the datagram's whole length, more than len(p) when cut.
// The x/sys wrapper allocates the sender's address on every call.
func recvfrom(fd int, p []byte, from *unix.RawSockaddrNetlink, fromLen *uint32) (int, unix.Errno) {
	*fromLen = unix.SizeofSockaddrNetlink
	n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), //nolint:gosec // G103, see above
		unix.MSG_DONTWAIT|unix.MSG_TRUNC, uintptr(unsafe.Pointer(from)), uintptr(unsafe.Pointer(fromLen))) //nolint:gosec // G103: as above
	return int(n), errno
}
