// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package taskstats

import (
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func TestOffsetsMatchXSys(t *testing.T) {
	var x unix.Taskstats
	for _, c := range []struct {
		name      string
		ours, sys uintptr
	}{
		{"ac_exitcode", offExitcode, unsafe.Offsetof(x.Ac_exitcode)},
		{"cpu_count", offCPUCount, unsafe.Offsetof(x.Cpu_count)},
		{"swapin_delay_total", offSwapinDelay, unsafe.Offsetof(x.Swapin_delay_total)},
		{"cpu_run_virtual_total", offCPURunVirtual, unsafe.Offsetof(x.Cpu_run_virtual_total)},
		{"ac_comm", offComm, unsafe.Offsetof(x.Ac_comm)},
		{"ac_uid", offUID, unsafe.Offsetof(x.Ac_uid)},
		{"ac_ppid", offPPID, unsafe.Offsetof(x.Ac_ppid)},
		{"ac_btime", offBtime, unsafe.Offsetof(x.Ac_btime)},
		{"ac_etime", offEtime, unsafe.Offsetof(x.Ac_etime)},
		{"hiwater_rss", offHiwaterRSS, unsafe.Offsetof(x.Hiwater_rss)},
		{"read_char", offReadChar, unsafe.Offsetof(x.Read_char)},
		{"cancelled_write_bytes", offCancelledWriteBytes, unsafe.Offsetof(x.Cancelled_write_bytes)},
		{"nivcsw", offNivcsw, unsafe.Offsetof(x.Nivcsw)},
		{"freepages_delay_total", offFreepagesDelay, unsafe.Offsetof(x.Freepages_delay_total)},
		{"thrashing_count", offThrashingCount, unsafe.Offsetof(x.Thrashing_count)},
		{"ac_btime64", offBtime64, unsafe.Offsetof(x.Ac_btime64)},
		{"compact_delay_total", offCompactDelay, unsafe.Offsetof(x.Compact_delay_total)},
		{"ac_tgid", offTGID, unsafe.Offsetof(x.Ac_tgid)},
		{"wpcopy_count", offWpcopyCount, unsafe.Offsetof(x.Wpcopy_count)},
		{"irq_delay_total", offIRQDelay, unsafe.Offsetof(x.Irq_delay_total)},
	} {
		if c.ours != c.sys {
			t.Errorf("%s at %d, x/sys says %d", c.name, c.ours, c.sys)
		}
	}
}

// rawStats builds a struct taskstats of the given version and size with
// distinct values in the fields the decoder reads.
func rawStats(version uint16, size int) []byte {
	b := make([]byte, size)
	put := func(off int, v uint64) {
		if off+8 <= size {
			binary.NativeEndian.PutUint64(b[off:], v)
		}
	}
	binary.NativeEndian.PutUint16(b, version)
	b[offFlag] = acGroup
	copy(b[offComm:], "postgres")
	binary.NativeEndian.PutUint32(b[offUID:], 1001)
	binary.NativeEndian.PutUint32(b[offPID:], 4242)
	binary.NativeEndian.PutUint32(b[offPPID:], 100)
	binary.NativeEndian.PutUint32(b[offBtime:], 1_700_000_000)
	put(offUtime, 1500)
	put(offStime, 500)
	put(offCPUDelay, 7)
	put(offBlkioDelay, 11)
	put(offFreepagesDelay, 13)
	put(offThrashingDelay, 17)
	put(offBtime64, 1_800_000_000)
	put(offCompactDelay, 19)
	if offTGID+4 <= size {
		binary.NativeEndian.PutUint32(b[offTGID:], 4242)
	}
	put(offWpcopyDelay, 23)
	put(offIRQDelay, 29)
	return b
}

// exitMessage wraps stats the way the kernel sends a single-threaded exit:
// AGGR_PID { PID, STATS }.
func exitMessage(tb testing.TB, stats []byte) []byte {
	tb.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.Nested(unix.TASKSTATS_TYPE_AGGR_PID, func(nae *netlink.AttributeEncoder) error {
		nae.Uint32(unix.TASKSTATS_TYPE_PID, 4242)
		nae.Bytes(unix.TASKSTATS_TYPE_STATS, stats)
		return nil
	})
	ae.Bytes(unix.TASKSTATS_TYPE_NULL, nil)
	b, err := ae.Encode()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestDecodeReadsTheFieldsEachVersionHas(t *testing.T) {
	for _, c := range []struct {
		version                         uint16
		size                            int
		thrashing, compact, wpcopy, irq bool
		btime                           uint64
		tgid                            uint32
	}{
		{8, 328, false, false, false, false, 1_700_000_000, 0},
		{9, 344, true, false, false, false, 1_700_000_000, 0},
		{11, 368, true, true, false, false, 1_800_000_000, 0},
		{14, 432, true, true, true, true, 1_800_000_000, 4242},
		{16, 560, true, true, true, true, 1_800_000_000, 4242},
		{99, 1024, true, true, true, true, 1_800_000_000, 4242}, // newer kernel: append-only, known prefix read
	} {
		m, err := DecodeMessage(exitMessage(t, rawStats(c.version, c.size)))
		if err != nil {
			t.Fatalf("version %d: %v", c.version, err)
		}
		s := m.Process()
		if s.PID != 4242 || s.UID != 1001 || s.PPID != 100 || s.Comm != "postgres" || s.UserUs != 1500 || s.SystemUs != 500 ||
			s.CPUDelay.TotalNs != 7 || s.BlkioDelay.TotalNs != 11 || s.FreepagesDelay.TotalNs != 13 || !s.LastOfGroup() {
			t.Errorf("version %d: %+v", c.version, s)
		}
		if s.HasThrashing != c.thrashing || s.HasCompact != c.compact || s.HasWpcopy != c.wpcopy || s.HasIRQ != c.irq ||
			s.BeginTime != c.btime || s.TGID != c.tgid {
			t.Errorf("version %d: presence/btime/tgid %+v", c.version, s)
		}
		if c.irq && (s.IRQDelay.TotalNs != 29 || s.WpcopyDelay.TotalNs != 23 || s.CompactDelay.TotalNs != 19 || s.ThrashingDelay.TotalNs != 17) {
			t.Errorf("version %d: late delays %+v", c.version, s)
		}
	}
}

func TestDecodeSkipsBadMessagesWithAReason(t *testing.T) {
	for name, c := range map[string]struct {
		msg  []byte
		want error
	}{
		"truncated for its version":   {exitMessage(t, rawStats(16, 400)), ErrTruncated},
		"shorter than any version":    {exitMessage(t, rawStats(8, 200)), ErrTruncated},
		"oversized":                   {exitMessage(t, rawStats(16, 5000)), ErrOversized},
		"version 0":                   {exitMessage(t, rawStats(0, 560)), ErrUnknownVersion},
		"older than supported":        {exitMessage(t, rawStats(3, 560)), ErrUnknownVersion},
		"attribute longer than data":  {[]byte{0xff, 0x00, 0x04, 0x00, 1, 2, 3, 4}, ErrMalformed},
		"no statistics":               {[]byte{}, ErrNoStats},
		"cut inside the nested stats": {exitMessage(t, rawStats(16, 560))[:300], ErrMalformed},
	} {
		_, err := DecodeMessage(c.msg)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}
}

func TestGroupAggregateStandsForTheProcess(t *testing.T) {
	ae := netlink.NewAttributeEncoder()
	task, group := rawStats(16, 560), rawStats(16, 560)
	binary.NativeEndian.PutUint64(group[offUtime:], 9000)
	ae.Nested(unix.TASKSTATS_TYPE_AGGR_PID, func(nae *netlink.AttributeEncoder) error {
		nae.Uint32(unix.TASKSTATS_TYPE_PID, 4243)
		nae.Bytes(unix.TASKSTATS_TYPE_STATS, task)
		return nil
	})
	ae.Nested(unix.TASKSTATS_TYPE_AGGR_TGID, func(nae *netlink.AttributeEncoder) error {
		nae.Uint32(unix.TASKSTATS_TYPE_TGID, 4242)
		nae.Bytes(unix.TASKSTATS_TYPE_STATS, group)
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if p := m.Process(); p != m.Group || p.UserUs != 9000 || p.PID != 4242 {
		t.Fatalf("process record %+v", p)
	}
}

// FuzzDecodeMessage: any bytes decode to a message or to one of the skip
// reasons, never a panic; a decoded record respects its version's layout.
func FuzzDecodeMessage(f *testing.F) {
	for _, v := range []struct {
		version uint16
		size    int
	}{{8, 328}, {14, 432}, {16, 560}, {16, 400}, {0, 560}, {99, 1024}} {
		f.Add(exitMessage(f, rawStats(v.version, v.size)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			for _, reason := range []error{ErrTruncated, ErrOversized, ErrUnknownVersion, ErrMalformed, ErrNoStats} {
				if errors.Is(err, reason) {
					return
				}
			}
			t.Fatalf("error without a skip reason: %v", err)
		}
		s := m.Process()
		if s == nil || s.Version < minVersion {
			t.Fatalf("decoded %+v", s)
		}
		if s.HasIRQ && !s.HasWpcopy || s.HasWpcopy && !s.HasCompact || s.HasCompact && !s.HasThrashing {
			t.Fatalf("fields present out of version order: %+v", s)
		}
	})
}
