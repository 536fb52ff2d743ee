// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package ownbackends

import "testing"

// A Pool's backends are the process's too, until removed; OnServer takes a
// backend for the collector's only on the server whose tm_id it was
// recorded with, never where the server is unknown.
func TestAPoolsBackendsAreTheProcesssOnTheirServer(t *testing.T) {
	var monitoring, actions Pool
	monitoring.Add(101, 0, "monitoring connection")
	actions.Add(202, 1_700_000_000, "action connection")
	t.Cleanup(func() { monitoring.Remove(101); actions.Remove(202) })

	if what, ok := Of(101); !ok || what != "monitoring connection" {
		t.Errorf("Of(101) = %q %v", what, ok)
	}
	if what, ok := Of(202); !ok || what != "action connection" {
		t.Errorf("Of(202) = %q %v", what, ok)
	}
	if !monitoring.Has(101) || monitoring.Has(202) || !actions.Has(202) || actions.Has(101) {
		t.Error("a Pool holds another's backend, or not its own")
	}
	if !OnServer(1_700_000_000, 202) {
		t.Error("the action connection is not the collector's on its own server")
	}
	for _, c := range []struct{ tmID, pid int64 }{{1_700_000_001, 202}, {0, 202}, {0, 101}, {1_700_000_000, 101}, {1_700_000_000, 303}} {
		if OnServer(c.tmID, c.pid) {
			t.Errorf("OnServer(%d, %d): true", c.tmID, c.pid)
		}
	}

	actions.Remove(202)
	if _, ok := Of(202); ok || actions.Has(202) || OnServer(1_700_000_000, 202) {
		t.Error("a removed backend is still the collector's")
	}
}
