// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package kernelunits

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

var host100 = Host{ClkTck: 100, PageSize: 4096, BootTime: time.Unix(1_700_000_000, 0).UTC()}

func TestHostFromProtoRejectsMissingOrNonPositiveConstants(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *yagpcc.ProcHost
		want string
	}{
		{"nil", nil, "no host constants"},
		{"zero clk_tck", &yagpcc.ProcHost{ClkTck: 0, PageSize: 4096, BootTimeUnix: 1}, "clk_tck 0"},
		{"negative page size", &yagpcc.ProcHost{ClkTck: 100, PageSize: -1, BootTimeUnix: 1}, "page_size -1"},
		{"no boot time", &yagpcc.ProcHost{ClkTck: 100, PageSize: 4096}, "boot_time_unix 0"},
		{"no CPU", &yagpcc.ProcHost{ClkTck: 100, PageSize: 4096, BootTimeUnix: 1, Cpus: proto.Uint32(0)}, "cpus 0"},
		{"more CPUs than any kernel", &yagpcc.ProcHost{ClkTck: 100, PageSize: 4096, BootTimeUnix: 1, Cpus: proto.Uint32(MaxCPUs + 1)}, "cpus 65537"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := HostFromProto(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestHostFromProtoKeepsTheHostsOwnConstants(t *testing.T) {
	h, err := HostFromProto(&yagpcc.ProcHost{Hostname: "sdw1", ClkTck: 250, PageSize: 65536, BootTimeUnix: 1_600_000_000})
	if err != nil {
		t.Fatal(err)
	}
	if h.ClkTck != 250 || h.PageSize != 65536 || !h.BootTime.Equal(time.Unix(1_600_000_000, 0)) {
		t.Fatalf("got %+v", h)
	}
	if h.CPUs != 0 {
		t.Fatalf("an answer without cpus (an older agent) gives %d CPUs, want 0 (unknown)", h.CPUs)
	}
	h, err = HostFromProto(&yagpcc.ProcHost{Hostname: "sdw1", ClkTck: 100, PageSize: 4096, BootTimeUnix: 1, Cpus: proto.Uint32(MaxCPUs)})
	if err != nil || h.CPUs != MaxCPUs {
		t.Fatalf("%d CPUs: got %+v, %v", MaxCPUs, h, err)
	}
}

func TestTickConversionUsesTheHostsClockRate(t *testing.T) {
	for _, tc := range []struct {
		clkTck, ticks int64
		want          float64
	}{
		{100, 250, 2.5},
		{250, 250, 1},
		{1000, 1, 0.001},
		{100, 0, 0},
	} {
		h := Host{ClkTck: tc.clkTck, PageSize: 4096}
		if got := h.Seconds(tc.ticks); got != tc.want {
			t.Errorf("%d ticks at %d Hz = %v s, want %v", tc.ticks, tc.clkTck, got, tc.want)
		}
	}
}

func TestCreationTimeIsBootTimePlusStartTicks(t *testing.T) {
	for _, tc := range []struct {
		clkTck, starttime int64
		want              time.Duration
	}{
		{100, 0, 0},
		{100, 12345, 123*time.Second + 450*time.Millisecond},
		{300, 1, time.Second / 300},        // a rate that does not divide 1e9 truncates to the ns
		{100, math.MaxInt64 / 1000, 0},     // checked below: no overflow
		{1000, 86_400_000, 24 * time.Hour}, // a day at 1000 Hz
	} {
		h := Host{ClkTck: tc.clkTck, PageSize: 4096, BootTime: host100.BootTime}
		got := h.SinceBoot(tc.starttime)
		if tc.starttime == math.MaxInt64/1000 {
			if !got.After(h.BootTime) {
				t.Errorf("huge starttime went backwards: %v", got)
			}
			continue
		}
		if want := h.BootTime.Add(tc.want); !got.Equal(want) {
			t.Errorf("starttime %d at %d Hz = %v, want %v", tc.starttime, tc.clkTck, got, want)
		}
	}
}

func TestSizeConversions(t *testing.T) {
	if got := KBToBytes(3); got != 3072 {
		t.Errorf("3 kB = %d B, want 3072", got)
	}
	if got := (Host{ClkTck: 100, PageSize: 16384}).PagesToBytes(3); got != 49152 {
		t.Errorf("3 pages of 16 KiB = %d B", got)
	}
	if got := NanosToSeconds(1_500_000_000); got != 1.5 {
		t.Errorf("1.5e9 ns = %v s", got)
	}
}
