// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import "testing"

func TestBackendRefRoundTripsAndRefusesOtherShapes(t *testing.T) {
	for _, ref := range []BackendRef{{"sdw1", 0, 4242}, {"mdw", -1, 1}, {"host/with/slash", 12, 99}} {
		got, err := ParseBackendRef(ref.String())
		if err != nil || got != ref {
			t.Errorf("%v: got %v, %v", ref, got, err)
		}
	}
	for _, bad := range []string{"", "sdw1", "sdw1/0", "/0/1", "sdw1/x/1", "sdw1/0/0", "sdw1/0/-5"} {
		if _, err := ParseBackendRef(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
