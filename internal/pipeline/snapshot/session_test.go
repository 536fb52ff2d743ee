// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package snapshot

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// sessionRoundTrip writes one session's state in a closing batch and reads
// it back as the processor and the exporter do.
func sessionRoundTrip(t *testing.T, st SessionState) SessionState {
	t.Helper()
	at := time.Unix(1_700_000_000, 0)
	db, user := "db", "u"
	md := NewClosingEncoder(Scope{Name: "test"}, at, Switches{}).Encode(&Closing{Time: at, TmID: 1, Dialect: "gp6",
		Sessions: []Session{{ID: 7, PID: 700, Database: &db, User: &user, State: st}}})
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		if pipeline.KindOf(rms.At(i).Resource().Attributes()) != pipeline.KindSession {
			continue
		}
		_, got, _, hasInfo, ok := DecodeSession(rms.At(i))
		if !ok || !hasInfo {
			t.Fatalf("session resource not read back (ok %v, info %v)", ok, hasInfo)
		}
		return got
	}
	t.Fatal("no session resource written")
	return SessionState{}
}

// Every column of the session state, each set (found by reflection, so a
// column added to SessionState and not to columns fails here), comes back
// as written; none set comes back none.
func TestEverySessionColumnRoundTrips(t *testing.T) {
	var st SessionState
	v := reflect.ValueOf(&st).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		if f.Kind() != reflect.Struct || f.FieldByName("Valid") == (reflect.Value{}) {
			continue
		}
		f.FieldByName("Valid").SetBool(true)
		switch x := f.FieldByName("V"); x.Interface().(type) {
		case string:
			x.SetString(name + " value")
		case int64:
			x.SetInt(int64(1000 + i))
		case bool:
			x.SetBool(true)
		case time.Time:
			x.Set(reflect.ValueOf(time.Unix(1_600_000_000+int64(i), 123456789).UTC()))
		default:
			t.Fatalf("column %s of a type this test does not fill", name)
		}
	}
	st.QueryTruncated = true
	st.Backends = []pipeline.BackendRef{{Host: "sdw1", SegmentID: 0, PID: 9001}, {Host: "sdw2", SegmentID: 3, PID: 9002}}
	if diff := cmp.Diff(st, sessionRoundTrip(t, st)); diff != "" {
		t.Errorf("session state read back differs (-written +read):\n%s", diff)
	}
	if diff := cmp.Diff(SessionState{}, sessionRoundTrip(t, SessionState{})); diff != "" {
		t.Errorf("a state of NULL columns read back differs (-written +read):\n%s", diff)
	}
}

// TestSessionResourceQueueRoundTrips: a session's resource queue travels
// as gpotel.resource_queue.name and reads back; an unknown one is absent.
func TestSessionResourceQueueRoundTrips(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	md := NewClosingEncoder(Scope{Name: "test"}, at, Switches{}).Encode(&Closing{Time: at, TmID: 1, Dialect: "gp6",
		Sessions: []Session{{ID: 7, PID: 700, ResourceQueue: "etl_queue"}, {ID: 8, PID: 800}}})
	got := map[int64]string{}
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		if pipeline.KindOf(rms.At(i).Resource().Attributes()) != pipeline.KindSession {
			continue
		}
		h, _, _, _, ok := DecodeSession(rms.At(i))
		if !ok {
			t.Fatal("session resource not read back")
		}
		got[h.Key.ID] = h.ResourceQueue
		if _, present := rms.At(i).Resource().Attributes().Get(pipeline.AttrResourceQueueName); present != (h.ResourceQueue != "") {
			t.Errorf("session %d: attribute present %v with queue %q", h.Key.ID, present, h.ResourceQueue)
		}
	}
	if want := map[int64]string{7: "etl_queue", 8: ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("queues read back %v, want %v", got, want)
	}
}
