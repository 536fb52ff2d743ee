// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"fmt"
	"sort"
	"time"
)

const coordinatorContent = -1

// SegmentConfigRow is one gp_segment_configuration row.
type SegmentConfigRow struct {
	Content  int64
	Role     string // 'p' primary, 'm' mirror
	Status   string // 'u' up, 'd' down
	Hostname string
}

// HostTopology says on which host each segment's processes run. Only acting
// primaries that are up (and the coordinator) route: a mirror's or a down
// instance's host never gets asked about a pid.
type HostTopology struct {
	segmentHost map[int64]string
	hosts       []string // sorted, distinct
	builtAt     time.Time
}

// buildTopology keeps the rows that route: role 'p' and status 'u'.
func buildTopology(rows []SegmentConfigRow, builtAt time.Time) (*HostTopology, error) {
	t := &HostTopology{segmentHost: make(map[int64]string, len(rows)), builtAt: builtAt}
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Role != "p" || r.Status != "u" {
			continue
		}
		if r.Hostname == "" {
			return nil, fmt.Errorf("gp_segment_configuration: content %d has an empty hostname", r.Content)
		}
		if prev, dup := t.segmentHost[r.Content]; dup && prev != r.Hostname {
			return nil, fmt.Errorf("gp_segment_configuration: content %d has two up primaries, on %s and %s", r.Content, prev, r.Hostname)
		}
		t.segmentHost[r.Content] = r.Hostname
		if !seen[r.Hostname] {
			seen[r.Hostname] = true
			t.hosts = append(t.hosts, r.Hostname)
		}
	}
	if _, ok := t.segmentHost[coordinatorContent]; !ok {
		return nil, fmt.Errorf("gp_segment_configuration: no up primary row for the coordinator (content %d)", coordinatorContent)
	}
	sort.Strings(t.hosts)
	return t, nil
}

// singleHostTopology is PostgreSQL's: everything is the coordinator's host.
func singleHostTopology(host string, builtAt time.Time) *HostTopology {
	return &HostTopology{
		segmentHost: map[int64]string{coordinatorContent: host},
		hosts:       []string{host},
		builtAt:     builtAt,
	}
}

// HostOf returns the host that serves a segment, if any instance routes for it.
func (t *HostTopology) HostOf(segment int64) (string, bool) {
	h, ok := t.segmentHost[segment]
	return h, ok
}

// CoordinatorHost is the coordinator's host name.
func (t *HostTopology) CoordinatorHost() string { return t.segmentHost[coordinatorContent] }

// Hosts lists the distinct routing hosts in name order.
func (t *HostTopology) Hosts() []string { return t.hosts }

// Stale tells whether the topology is older than ttl.
func (t *HostTopology) Stale(now time.Time, ttl time.Duration) bool {
	return now.Sub(t.builtAt) >= ttl
}
