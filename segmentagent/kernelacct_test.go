// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpotel/gpotel/segmentagent/taskstats"
)

// distinctStats is a kernel record whose every figure differs from the others.
func distinctStats() *taskstats.Stats {
	s := &taskstats.Stats{Comm: "postgres"}
	v, n := reflect.ValueOf(s).Elem(), uint64(1)
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(n)
		case reflect.Int8:
			f.SetInt(int64(n)) // #nosec G115 -- a few dozen fields
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Struct: // a Delay
			f.Field(0).SetUint(n)
			n++
			f.Field(1).SetUint(n)
		}
		n++
	}
	return s
}

func TestRecordCarriesEveryFigureOfTheKernelRecord(t *testing.T) {
	s := distinctStats()
	r := recordFromStats(s)
	for _, m := range []protoreflect.Message{r.ProtoReflect(), r.GetDelays().ProtoReflect()} {
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			if !m.Has(fields.Get(i)) {
				t.Errorf("%s not set", fields.Get(i).FullName())
			}
		}
	}
	d := r.GetDelays()
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"version", uint64(r.GetVersion()), uint64(s.Version)}, {"pid", uint64(r.GetPid()), uint64(s.PID)},
		{"tgid", uint64(r.GetTgid()), uint64(s.TGID)}, {"ppid", uint64(r.GetPpid()), uint64(s.PPID)},
		{"uid", uint64(r.GetUid()), uint64(s.UID)}, {"exit_code", uint64(r.GetExitCode()), uint64(s.ExitCode)},
		{"flags", uint64(r.GetFlags()), uint64(s.Flag)}, {"begin_time_unix", r.GetBeginTimeUnix(), s.BeginTime},
		{"elapsed_us", r.GetElapsedUs(), s.ElapsedUs}, {"user_us", r.GetUserUs(), s.UserUs}, {"system_us", r.GetSystemUs(), s.SystemUs},
		{"cpu_run_real_ns", r.GetCpuRunRealNs(), s.CPURunRealNs}, {"cpu_run_virtual_ns", r.GetCpuRunVirtualNs(), s.CPURunVirtualNs},
		{"minor_faults", r.GetMinorFaults(), s.MinorFaults}, {"major_faults", r.GetMajorFaults(), s.MajorFaults},
		{"hiwater_rss_kb", r.GetHiwaterRssKb(), s.HiwaterRSSKiB}, {"hiwater_vm_kb", r.GetHiwaterVmKb(), s.HiwaterVMKiB},
		{"read_chars", r.GetReadChars(), s.ReadChars}, {"write_chars", r.GetWriteChars(), s.WriteChars},
		{"read_syscalls", r.GetReadSyscalls(), s.ReadSyscalls}, {"write_syscalls", r.GetWriteSyscalls(), s.WriteSyscalls},
		{"read_bytes", r.GetReadBytes(), s.ReadBytes}, {"write_bytes", r.GetWriteBytes(), s.WriteBytes},
		{"cancelled_write_bytes", r.GetCancelledWriteBytes(), s.CancelledWrite},
		{"voluntary_ctxt_switches", r.GetVoluntaryCtxtSwitches(), s.VoluntaryCtxSw},
		{"nonvoluntary_ctxt_switches", r.GetNonvoluntaryCtxtSwitches(), s.InvoluntaryCtxSw},
		{"cpu delay", d.GetCpu().GetTotalNs(), s.CPUDelay.TotalNs}, {"blkio delays", d.GetBlkio().GetCount(), s.BlkioDelay.Count},
		{"swapin delay", d.GetSwapin().GetTotalNs(), s.SwapinDelay.TotalNs}, {"freepages delay", d.GetFreepages().GetTotalNs(), s.FreepagesDelay.TotalNs},
		{"thrashing delay", d.GetThrashing().GetTotalNs(), s.ThrashingDelay.TotalNs}, {"compact delay", d.GetCompact().GetTotalNs(), s.CompactDelay.TotalNs},
		{"wpcopy delay", d.GetWpcopy().GetTotalNs(), s.WpcopyDelay.TotalNs}, {"irq delays", d.GetIrq().GetCount(), s.IRQDelay.Count},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
	if r.GetComm() != s.Comm {
		t.Errorf("comm %q", r.GetComm())
	}
}

func TestRecordLeavesOutDelaysTheKernelDoesNotHave(t *testing.T) {
	s := distinctStats()
	s.HasThrashing, s.HasCompact, s.HasWpcopy, s.HasIRQ = false, false, false, false
	d := recordFromStats(s).GetDelays()
	if d.GetThrashing() != nil || d.GetCompact() != nil || d.GetWpcopy() != nil || d.GetIrq() != nil || d.GetCpu() == nil {
		t.Fatalf("delays %v", d)
	}
}

// Delay accounting is on where kernel.task_delayacct is 1, and on a kernel
// before 5.14 (no such sysctl: on unless booted with nodelayacct).
func TestDelayacctEnabled(t *testing.T) {
	for _, c := range []struct {
		name            string
		sysctl, cmdline *string
		want            bool
	}{
		{"sysctl 1", ptr("1\n"), ptr("ro quiet\n"), true},
		{"sysctl 0", ptr("0\n"), ptr("ro quiet delayacct\n"), false},
		{"no sysctl (before 5.14)", nil, ptr("BOOT_IMAGE=/vmlinuz-3.10.0 ro quiet\n"), true},
		{"no sysctl, booted with nodelayacct", nil, ptr("ro nodelayacct quiet\n"), false},
		{"no sysctl, no cmdline", nil, nil, false},
	} {
		root := t.TempDir()
		write := func(name string, v *string) {
			if v == nil {
				return
			}
			path := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(*v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write("sys/kernel/task_delayacct", c.sysctl)
		write("cmdline", c.cmdline)
		if got := delayacctEnabled(root); got != c.want {
			t.Errorf("%s: delay accounting %v, want %v", c.name, got, c.want)
		}
	}
}

func ptr(s string) *string { return &s }
