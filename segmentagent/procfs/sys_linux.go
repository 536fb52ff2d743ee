// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package procfs

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The raw calls below take NUL-terminated names from reused buffers; the
// string-taking wrappers in x/sys/unix copy every path, one allocation a file.

func openat(dirfd int, name []byte, flags int) (int, error) {
	for {
		fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&name[0])), //nolint:gosec // G103, see above
			uintptr(flags|unix.O_CLOEXEC), 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return -1, errno
		}
		return int(fd), nil
	}
}

func faccessat(dirfd int, name []byte) error {
	_, _, errno := unix.Syscall6(unix.SYS_FACCESSAT, uintptr(dirfd), uintptr(unsafe.Pointer(&name[0])), //nolint:gosec // G103, see above
		unix.F_OK, 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func read(fd int, p []byte) (int, error) {
	for {
		n, err := unix.Read(fd, p)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}

func closeFD(fd int) { _ = unix.Close(fd) }

// vanishedErrno reports the errors procfs gives for a process that has exited.
func vanishedErrno(err error) bool {
	return err == unix.ENOENT || err == unix.ESRCH
}
