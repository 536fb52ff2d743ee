// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package agentconn

import (
	"testing"

	"go.opentelemetry.io/collector/component"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpotel/gpotel/internal/cpuslots"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// answer is an agent answer with every kind of field the decoder meets.
func answer() *yagpcc.GetPidProcInfoResponse {
	cmd := int64(7)
	return &yagpcc.GetPidProcInfoResponse{
		PidProcData: []*yagpcc.GpPidProcInfo{
			{Pid: 4000, ProcStat: &yagpcc.ProcStat{Utime: 250, Stime: 50, Starttime: 1000, Vsize: 1 << 20, Rss: 3},
				ProcStatus: &yagpcc.ProcStatus{VmRssKb: &cmd, Threads: 1, VoluntaryCtxtSwitches: 4},
				ProcIo:     &yagpcc.ProcIO{ReadBytes: 4096}, CommandCount: &cmd},
			{Pid: 4001},
		},
		Host:    &yagpcc.ProcHost{ClkTck: 100, PageSize: 4096},
		Summary: &yagpcc.ProcReadSummary{Requested: 2, Answered: 2},
	}
}

// The generated decoder reads what the reflection decoder reads, and
// what either encoder writes.
func TestCodecDecodesAsReflectionDoes(t *testing.T) {
	want := answer()
	wire, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got yagpcc.GetPidProcInfoResponse
	if err := Codec.Unmarshal(wire, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(want, &got) {
		t.Errorf("decoded %v, want %v", &got, want)
	}
	vt, err := Codec.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var back yagpcc.GetPidProcInfoResponse
	if err := proto.Unmarshal(vt, &back); err != nil || !proto.Equal(want, &back) {
		t.Errorf("generated encoding read back as %v (%v), want %v", &back, err, want)
	}
	if _, ok := any(&got).(vtMessage); !ok {
		t.Error("GetPidProcInfoResponse has no generated decoder: run make proto")
	}
	if _, ok := any(&gpotelv1.GetExitRecordsResponse{}).(vtMessage); !ok {
		t.Error("GetExitRecordsResponse has no generated decoder: run make proto")
	}
}

// Wherever both decoders accept an input they read the same known
// fields. They differ on malformed input: the generated one refuses a
// known field with the wrong wire type (reflection keeps it as an unknown
// field) and skips an unknown group reflection refuses as malformed;
// neither reads a known field wrong.
func FuzzCodecMatchesReflection(f *testing.F) {
	wire, err := proto.Marshal(answer())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(wire)
	f.Add([]byte{0x0a, 0x02, 0x08})
	f.Fuzz(func(t *testing.T, b []byte) {
		var byReflection, generated yagpcc.GetPidProcInfoResponse
		errR := proto.Unmarshal(b, &byReflection)
		errG := Codec.Unmarshal(b, &generated)
		if errG != nil || errR != nil {
			return
		}
		// Unknown fields are kept as read, which neither decoder promises byte for byte.
		discardUnknown(byReflection.ProtoReflect())
		discardUnknown(generated.ProtoReflect())
		if !proto.Equal(&byReflection, &generated) {
			t.Fatalf("reflection read %v, generated %v", &byReflection, &generated)
		}
	})
}

func discardUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				discardUnknown(v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				discardUnknown(mv.Message())
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			discardUnknown(v.Message())
		}
		return true
	})
}

// BenchmarkDecodeAnswer decodes one 1000-process answer by reflection and
// by the generated code.
func BenchmarkDecodeAnswer(b *testing.B) {
	a := answer()
	one := a.GetPidProcData()[0]
	a.PidProcData = nil
	for i := range 1000 {
		p := proto.Clone(one).(*yagpcc.GpPidProcInfo)
		p.Pid = int64(10_000 + i)
		a.PidProcData = append(a.PidProcData, p)
	}
	wire, err := proto.Marshal(a)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		decode func([]byte, *yagpcc.GetPidProcInfoResponse) error
	}{
		{"reflection", func(w []byte, r *yagpcc.GetPidProcInfoResponse) error { return proto.Unmarshal(w, r) }},
		{"generated", func(w []byte, r *yagpcc.GetPidProcInfoResponse) error { return Codec.Unmarshal(w, r) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r yagpcc.GetPidProcInfoResponse
				if err := c.decode(wire, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// slotProbe records how many of its slots were taken while it was
// decoded.
type slotProbe struct {
	slots cpuslots.Slots
	inUse int
}

func (p *slotProbe) MarshalVT() ([]byte, error) { return nil, nil }
func (p *slotProbe) UnmarshalVT([]byte) error {
	p.inUse = p.slots.InUse()
	return nil
}

// A pool built with DecodeInSlots decodes a large answer inside a slot, so
// that many agents' answers decoded at once cannot take every core from
// the API; a small message is decoded at once, and a pool without the
// option (an API call's) never waits for a slot.
func TestLargeAnswersAreDecodedInACPUSlot(t *testing.T) {
	slots := cpuslots.New(2)
	withSlots := NewPool(Config{}, nil, component.TelemetrySettings{}, 0, DecodeInSlots(slots)).codec
	for _, c := range []struct {
		name  string
		codec encoding.Codec
		size  int
		want  int
	}{
		{"in slots, large", withSlots, heavyAnswerBytes, 1},
		{"in slots, small", withSlots, heavyAnswerBytes - 1, 0},
		{"in slots, empty", withSlots, 0, 0},
		{"plain, large", NewPool(Config{}, nil, component.TelemetrySettings{}, 0).codec, heavyAnswerBytes, 0},
	} {
		p := slotProbe{slots: slots}
		if err := c.codec.Unmarshal(make([]byte, c.size), &p); err != nil {
			t.Fatal(err)
		}
		if p.inUse != c.want {
			t.Errorf("%s: a %d-byte message was decoded with %d slots taken, want %d", c.name, c.size, p.inUse, c.want)
		}
		if n := slots.InUse(); n != 0 {
			t.Fatalf("%s: %d slots still taken after decoding", c.name, n)
		}
	}
}
