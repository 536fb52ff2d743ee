// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package querylife

import (
	"slices"

	"github.com/gpotel/gpotel/internal/pipeline/events"
)

// partialMark is why a query's or a session's figures are a lower bound
// (docs/pipeline.md, finished work); the zero value: they are not.
type partialMark struct {
	// startedBefore: it started before gpotel first saw it, which was at
	// seenFrom (unix ns).
	startedBefore bool
	seenFrom      int64
	// hosts are the rows of the hosts of its processes that did not
	// answer, in host table order: at most the cluster's hosts.
	hosts []uint32
	// silentSince is the first snapshot in which one of them did not answer.
	silentSince int64
}

func (m *partialMark) partial() bool { return m.startedBefore || len(m.hosts) > 0 }

// startBefore marks it started before gpotel first saw it, at seenFrom.
func (m *partialMark) startBefore(seenFrom int64) {
	m.startedBefore, m.seenFrom = true, seenFrom
}

// hostSilent adds host row h, silent since the snapshot at since.
func (m *partialMark) hostSilent(h uint32, since int64) {
	if i, found := slices.BinarySearch(m.hosts, h); !found {
		m.hosts = slices.Insert(m.hosts, i, h)
	}
	if m.silentSince == 0 || since < m.silentSince {
		m.silentSince = since
	}
}

// cause is what the event says of m, naming at most
// pipeline.MaxPartialHosts hosts (names by host row).
func (m *partialMark) cause(names []string) events.PartialCause {
	c := events.PartialCause{StartedBefore: m.startedBefore, Since: m.seenFrom}
	for i, h := range m.hosts {
		if i == events.MaxPartialHosts {
			c.MoreHosts = len(m.hosts) - i
			break
		}
		c.Hosts = append(c.Hosts, names[h])
	}
	if len(m.hosts) > 0 {
		c.Since = m.silentSince
	}
	return c
}
