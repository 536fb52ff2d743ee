// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// The receiver's read delay of each host reaches the processor; a hostile
// value (negative, an hour or more) reads as not measured.
func TestHostReadDelayRoundTrips(t *testing.T) {
	at := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	c := Closing{Time: at, TmID: 1, Coordinator: "mdw", Hosts: []HostAnswer{
		{Host: "sdw1", Up: true, ReadDelay: int64(250 * time.Millisecond)},
		{Host: "sdw2", Up: true},
	}}
	md := NewClosingEncoder(Scope{}, at, Switches{}).Encode(&c)
	h := DecodeSnapshot(md.ResourceMetrics().At(0))
	require.Len(t, h.Hosts, 2)
	assert.Equal(t, int64(250*time.Millisecond), h.Hosts[0].ReadDelay)
	assert.Zero(t, h.Hosts[1].ReadDelay)

	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := range ms.Len() {
		if ms.At(i).Name() == pipeline.MetricHostReadDelay {
			ms.At(i).Gauge().DataPoints().At(0).SetDoubleValue(-1)
		}
	}
	assert.Zero(t, DecodeSnapshot(md.ResourceMetrics().At(0)).Hosts[0].ReadDelay)
}
