// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package taskstats

import (
	"encoding/binary"
	"errors"
	"reflect"
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

// TestDecodeReadsEveryFieldFromItsOwnPlace lays a struct taskstats out as
// golang.org/x/sys/unix declares it for this architecture, every field with
// a value of its own, and checks each decoded field against it: a field read
// from its neighbour's place shows, which rawStats (written with the
// decoder's own offsets) cannot.
func TestDecodeReadsEveryFieldFromItsOwnPlace(t *testing.T) {
	var x unix.Taskstats
	v := reflect.ValueOf(&x).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.CanSet() && f.Kind() >= reflect.Uint8 && f.Kind() <= reflect.Uint64 {
			f.SetUint(uint64(101 + i)) // distinct, and small enough for a byte
		}
	}
	x.Version, x.Ac_flag = 14, acGroup
	for i, c := range "postgres" {
		x.Ac_comm[i] = int8(c)
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&x)), unsafe.Sizeof(x))[:offIRQDelay+8] // #nosec G103 -- the struct's own bytes, read only
	m, err := DecodeMessage(exitMessage(t, raw))
	if err != nil {
		t.Fatal(err)
	}
	s := m.Process()
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"ac_exitcode", uint64(s.ExitCode), uint64(x.Ac_exitcode)},
		{"ac_nice", uint64(s.Nice), uint64(x.Ac_nice)},
		{"ac_uid", uint64(s.UID), uint64(x.Ac_uid)},
		{"ac_gid", uint64(s.GID), uint64(x.Ac_gid)},
		{"ac_pid", uint64(s.PID), uint64(x.Ac_pid)},
		{"ac_ppid", uint64(s.PPID), uint64(x.Ac_ppid)},
		{"ac_tgid", uint64(s.TGID), uint64(x.Ac_tgid)},
		{"ac_btime64", s.BeginTime, x.Ac_btime64},
		{"ac_etime", s.ElapsedUs, x.Ac_etime},
		{"ac_utime", s.UserUs, x.Ac_utime},
		{"ac_stime", s.SystemUs, x.Ac_stime},
		{"cpu_run_real_total", s.CPURunRealNs, x.Cpu_run_real_total},
		{"cpu_run_virtual_total", s.CPURunVirtualNs, x.Cpu_run_virtual_total},
		{"ac_minflt", s.MinorFaults, x.Ac_minflt},
		{"ac_majflt", s.MajorFaults, x.Ac_majflt},
		{"hiwater_rss", s.HiwaterRSSKiB, x.Hiwater_rss},
		{"hiwater_vm", s.HiwaterVMKiB, x.Hiwater_vm},
		{"read_char", s.ReadChars, x.Read_char},
		{"write_char", s.WriteChars, x.Write_char},
		{"read_syscalls", s.ReadSyscalls, x.Read_syscalls},
		{"write_syscalls", s.WriteSyscalls, x.Write_syscalls},
		{"read_bytes", s.ReadBytes, x.Read_bytes},
		{"write_bytes", s.WriteBytes, x.Write_bytes},
		{"cancelled_write_bytes", s.CancelledWrite, x.Cancelled_write_bytes},
		{"nvcsw", s.VoluntaryCtxSw, x.Nvcsw},
		{"nivcsw", s.InvoluntaryCtxSw, x.Nivcsw},
		{"cpu_count", s.CPUDelay.Count, x.Cpu_count},
		{"cpu_delay_total", s.CPUDelay.TotalNs, x.Cpu_delay_total},
		{"blkio_count", s.BlkioDelay.Count, x.Blkio_count},
		{"blkio_delay_total", s.BlkioDelay.TotalNs, x.Blkio_delay_total},
		{"swapin_count", s.SwapinDelay.Count, x.Swapin_count},
		{"swapin_delay_total", s.SwapinDelay.TotalNs, x.Swapin_delay_total},
		{"freepages_count", s.FreepagesDelay.Count, x.Freepages_count},
		{"freepages_delay_total", s.FreepagesDelay.TotalNs, x.Freepages_delay_total},
		{"thrashing_count", s.ThrashingDelay.Count, x.Thrashing_count},
		{"thrashing_delay_total", s.ThrashingDelay.TotalNs, x.Thrashing_delay_total},
		{"compact_count", s.CompactDelay.Count, x.Compact_count},
		{"compact_delay_total", s.CompactDelay.TotalNs, x.Compact_delay_total},
		{"wpcopy_count", s.WpcopyDelay.Count, x.Wpcopy_count},
		{"wpcopy_delay_total", s.WpcopyDelay.TotalNs, x.Wpcopy_delay_total},
		{"irq_count", s.IRQDelay.Count, x.Irq_count},
		{"irq_delay_total", s.IRQDelay.TotalNs, x.Irq_delay_total},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if s.Comm != "postgres" || s.Flag != acGroup {
		t.Errorf("comm %q flag %#x", s.Comm, s.Flag)
	}
}
