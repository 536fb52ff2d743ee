// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"bytes"
	"strings"

	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

// Mount is one cgroup file system mount from /proc/self/mountinfo.
type Mount struct {
	// Version is 1 for a cgroup v1 hierarchy, 2 for the unified one.
	Version int
	// Root is the hierarchy path mounted here ("/" unless a subtree is bind-mounted).
	Root string
	// MountPoint is where the hierarchy is seen in this mount namespace.
	MountPoint string
	// Controllers of a v1 hierarchy as its super options name them
	// ("cpu", "cpuacct", "name=systemd"); empty for v2.
	Controllers []string
}

// ParseMountinfo returns the cgroup and cgroup2 mounts listed in the content
// of /proc/<pid>/mountinfo, in file order. Other file systems are skipped; a
// line of another shape is an error (the format is fixed since Linux 2.6.26).
func ParseMountinfo(b []byte) ([]Mount, error) {
	if len(b) > 0 && !kerneltext.EndsWithNewline(b) {
		return nil, ErrTruncated
	}
	var mounts []Mount
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		line := b[:nl]
		b = b[nl+1:]
		// id parent major:minor root mount-point options [optional...] - fstype source super-options
		pre, post, ok := bytes.Cut(line, []byte(" - "))
		if !ok {
			return nil, kerneltext.ShapeError("mountinfo: line %q has no separator", line)
		}
		head := bytes.Fields(pre)
		tail := bytes.Fields(post)
		if len(head) < 6 || len(tail) < 3 {
			return nil, kerneltext.ShapeError("mountinfo: line %q has too few fields", line)
		}
		var version int
		switch string(tail[0]) {
		case "cgroup":
			version = 1
		case "cgroup2":
			version = 2
		default:
			continue
		}
		m := Mount{Version: version, Root: unescapeOctal(head[3]), MountPoint: unescapeOctal(head[4])}
		if version == 1 {
			for _, opt := range bytes.Split(tail[2], []byte(",")) {
				if isControllerOption(opt) {
					m.Controllers = append(m.Controllers, string(opt))
				}
			}
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

// v1Controllers are the kernel's cgroup v1 subsystems; a v1 mount's other
// super options (rw, seclabel, xattr, release_agent=...) name none.
var v1Controllers = map[string]bool{
	"cpuset": true, "cpu": true, "cpuacct": true, "blkio": true, "memory": true, "devices": true,
	"freezer": true, "net_cls": true, "perf_event": true, "net_prio": true, "hugetlb": true,
	"pids": true, "rdma": true, "misc": true, "debug": true,
}

// isControllerOption: a subsystem, or name=x naming a hierarchy without one.
func isControllerOption(opt []byte) bool {
	return v1Controllers[string(opt)] || bytes.HasPrefix(opt, []byte("name=")) && len(opt) > len("name=")
}

// unescapeOctal undoes mountinfo's \ooo escapes of blanks, tabs, newlines and backslashes.
func unescapeOctal(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	var s strings.Builder
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+3 < len(b) && isOctal(b[i+1]) && isOctal(b[i+2]) && isOctal(b[i+3]) {
			s.WriteByte((b[i+1]-'0')<<6 | (b[i+2]-'0')<<3 | (b[i+3] - '0'))
			i += 3
			continue
		}
		s.WriteByte(b[i])
	}
	return s.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
