// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"bytes"
	"strconv"

	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

// Membership is one line of /proc/<pid>/cgroup: the process's group in one hierarchy.
type Membership struct {
	// HierarchyID is 0 for cgroup v2, the v1 hierarchy's id otherwise.
	HierarchyID int
	// Controllers of a v1 hierarchy ("cpu,cpuacct" split); empty for v2.
	Controllers []string
	// Path of the group inside the hierarchy, relative to the reader's cgroup namespace.
	Path string
}

// ParseProcCgroup parses the content of /proc/<pid>/cgroup
// ("hierarchy-ID:controller-list:cgroup-path" per line). A group's path may
// itself hold colons, so a line splits at its first two only.
func ParseProcCgroup(b []byte) ([]Membership, error) {
	if !kerneltext.EndsWithNewline(b) {
		return nil, ErrTruncated
	}
	var ms []Membership
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		line := b[:nl]
		b = b[nl+1:]
		idText, rest, ok1 := bytes.Cut(line, []byte(":"))
		controllers, path, ok2 := bytes.Cut(rest, []byte(":"))
		if !ok1 || !ok2 || len(path) == 0 || path[0] != '/' {
			return nil, kerneltext.ShapeError("cgroup: line %q is not id:controllers:/path", line)
		}
		id, err := strconv.Atoi(string(idText))
		if err != nil || id < 0 {
			return nil, kerneltext.ShapeError("cgroup: hierarchy id %q", idText)
		}
		m := Membership{HierarchyID: id, Path: string(path)}
		if len(controllers) > 0 {
			for _, c := range bytes.Split(controllers, []byte(",")) {
				m.Controllers = append(m.Controllers, string(c))
			}
		}
		if (id == 0) != (len(m.Controllers) == 0) {
			return nil, kerneltext.ShapeError("cgroup: line %q mixes v1 and v2", line)
		}
		ms = append(ms, m)
	}
	return ms, nil
}
