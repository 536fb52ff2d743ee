// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// Resource is a resource the kernel tracks pressure for.
type Resource string

// The pressure files' names: /proc/pressure/<r>, <group>/<r>.pressure.
const (
	CPU    Resource = "cpu"
	Memory Resource = "memory"
	IO     Resource = "io"
	IRQ    Resource = "irq"
)

// Resources lists them in the order answers carry them.
var Resources = []Resource{CPU, Memory, IO, IRQ}

// optionalResource is absent on kernels without CONFIG_IRQ_TIME_ACCOUNTING;
// its absence is normal and not reported.
const optionalResource = IRQ

// PressureSet is the pressure of a host or a group; a resource whose file
// could not be read is missing from ByResource and explained in Unread.
type PressureSet struct {
	ByResource map[Resource]Pressure
	Unread     []string
}

// maxFileSize bounds a runaway file; mountinfo of a busy container host is the largest read here.
const maxFileSize = 1 << 20

// ReadHostPressure reads /proc/pressure/* under procRoot.
func ReadHostPressure(procRoot string) PressureSet {
	return readPressureSet(func(r Resource) string { return filepath.Join(procRoot, "pressure", string(r)) })
}

// ReadGroupPressure reads the <resource>.pressure files of a cgroup v2 group's directory.
func ReadGroupPressure(dir string) PressureSet {
	return readPressureSet(func(r Resource) string { return filepath.Join(dir, string(r)+".pressure") })
}

func readPressureSet(file func(Resource) string) PressureSet {
	set := PressureSet{ByResource: make(map[Resource]Pressure, len(Resources))}
	for _, r := range Resources {
		name := file(r)
		b, err := readFile(name)
		if err == nil {
			var p Pressure
			if p, err = ParsePressure(b); err == nil {
				set.ByResource[r] = p
				continue
			}
		}
		if r == optionalResource && errors.Is(err, os.ErrNotExist) {
			continue
		}
		set.Unread = append(set.Unread, fmt.Sprintf("%s: %s", filepath.Base(name), pressureReason(err)))
	}
	return set
}

// pressureReason says why a pressure file could not be read in a DBA's terms.
func pressureReason(err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "not provided (kernel without CONFIG_PSI, or the group is gone)"
	case errors.Is(err, unix.EOPNOTSUPP):
		return "pressure accounting is off (boot with psi=1)"
	}
	return err.Error()
}

// readFile reads a kernel file whole into a new buffer.
func readFile(name string) ([]byte, error) {
	buf := make([]byte, 4096)
	return readSmall(name, &buf)
}

// cgroupBuffers hold /proc/<pid>/cgroup reads: one a process, on every call.
var cgroupBuffers = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// readSmall reads a procfs or cgroupfs file with raw system calls into *buf,
// growing it up to maxFileSize; os.Open and io.ReadAll cost half again as much.
func readSmall(name string, buf *[]byte) ([]byte, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd) //nolint:errcheck // read-only
	n := 0
	for {
		m, err := unix.Read(fd, (*buf)[n:])
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: name, Err: err}
		}
		// Only end of file ends it: a seq_file larger than a page (mountinfo)
		// comes in short reads that stop at a record boundary.
		if m == 0 {
			return (*buf)[:n], nil
		}
		n += m
		if n < len(*buf) {
			continue
		}
		if n >= maxFileSize {
			return nil, fmt.Errorf("%s: larger than %d bytes", name, maxFileSize)
		}
		*buf = append(*buf, make([]byte, n)...)
	}
}
