// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package dialect

import (
	"strings"
	"testing"
)

// What each dialect's server is, as its source (and for Greenplum 6 a
// real server) shows it.
func TestEachDialectHasItsServersFacts(t *testing.T) {
	for _, tc := range []struct {
		d    Dialect
		want Facts
	}{
		{GP6, Facts{Greenplum: true, UtilityMode: "-c gp_session_role=utility",
			ServerLog:         ServerLog{Layout: "gpcsv", Directory: "pg_log", Filename: "gpdb-%Y-%m-%d_%H%M%S.csv"},
			SessionMemoryView: "session_state.session_level_memory_consumption", SessionMemoryExtension: "gp_internal_tools",
			MoveQuerySchema: "gp_toolkit", LegacyPartitions: true}},
		{GP7, Facts{Greenplum: true, UtilityMode: "-c gp_role=utility",
			ServerLog:         ServerLog{Layout: "gpcsv", Directory: "log", Filename: "gpdb-%Y-%m-%d_%H%M%S.csv"},
			SessionMemoryView: "gp_toolkit.resgroup_session_level_memory_consumption", SessionMemoryExtension: "gp_toolkit",
			MoveQuerySchema: "pg_catalog"}},
		{Cloudberry, Facts{Greenplum: true, UtilityMode: "-c gp_role=utility",
			ServerLog:         ServerLog{Layout: "gpcsv", Directory: "log", Filename: "gpdb-%Y-%m-%d_%H%M%S.csv"},
			SessionMemoryView: "gp_toolkit.resgroup_session_level_memory_consumption", SessionMemoryExtension: "gp_toolkit",
			MoveQuerySchema: "pg_catalog"}},
		{PostgreSQL, Facts{ServerLog: ServerLog{Layout: "stderr"}}},
		{Auto, Facts{}},
		{"gp5", Facts{}},
	} {
		if got := tc.d.Facts(); got != tc.want {
			t.Errorf("%s.Facts() = %+v\nwant %+v", tc.d, got, tc.want)
		}
		if got := tc.d.Greenplum(); got != tc.want.Greenplum {
			t.Errorf("%s.Greenplum() = %t, want %t", tc.d, got, tc.want.Greenplum)
		}
	}
}

func TestAllListsEveryDialectWithFacts(t *testing.T) {
	if len(All) != len(facts) {
		t.Fatalf("All has %d dialects, the facts table %d", len(All), len(facts))
	}
	for _, d := range All {
		if !d.Known() {
			t.Errorf("%s is in All but has no facts", d)
		}
	}
	if Auto.Known() {
		t.Error("Auto is known, want it to be no dialect")
	}
}

// The version() strings of real servers and of the testbed's emulations.
var versions = []struct {
	version string
	want    Dialect
}{
	// A real Greenplum 6.24.3 (docs/compatibility.md).
	{"PostgreSQL 9.4.26 (Greenplum Database 6.24.3 build commit:25d3498a400ca5230e81abb94861f23389315213) on x86_64-unknown-linux-gnu, compiled by gcc " +
		"(Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit compiled on Nov 26 2026 14:19:25", GP6},
	{"PostgreSQL 9.4.26 (Greenplum Database 6.26.0 build commit:abc) on x86_64-unknown-linux-gnu, compiled by gcc (GCC) 6.4.0, 64-bit", GP6},
	{"PostgreSQL 12.12 (Greenplum Database 7.1.0 build commit:gpotel-testbed) on x86_64-pc-linux-gnu, compiled by gcc (GCC) 8.5.0 20210514 (Red Hat " +
		"8.5.0-18), 64-bit compiled on Jan 1 2024 00:00:00", GP7},
	{"PostgreSQL 14.4 (Apache Cloudberry 2.0.0-incubating build commit:gpotel-testbed) on x86_64-pc-linux-gnu, compiled by gcc (GCC) 11.4.1, 64-bit " +
		"compiled on Jan 1 2025 00:00:00", Cloudberry},
	{"PostgreSQL 14.4 (Cloudberry Database 1.5.4 build commit:abc) on x86_64-pc-linux-gnu", Cloudberry},
	{"PostgreSQL 15.8 (Debian 15.8-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit", PostgreSQL},
	{"PostgreSQL 17.0 on aarch64-apple-darwin", PostgreSQL},
}

func TestDetectNamesTheDialectOfEachServersVersion(t *testing.T) {
	for _, tc := range versions {
		if got, err := Detect(tc.version); err != nil || got != tc.want {
			t.Errorf("Detect(%q) = %q, %v; want %q", tc.version, got, err, tc.want)
		}
	}
}

func TestDetectRefusesWhatItDoesNotKnow(t *testing.T) {
	for _, v := range []string{
		"PostgreSQL 8.3.23 (Greenplum Database 5.29.0 build commit:abc)",
		"PostgreSQL 9.4 (Greenplum Database build dev)",
		"PostgreSQL 9.4 (Greenplum Database 99999999999999999999.0 build dev)",
		"CockroachDB CCL v23.1.0",
		"",
	} {
		if d, err := Detect(v); err == nil {
			t.Errorf("Detect(%q) = %q, want an error", v, d)
		}
	}
}

func TestConfigurationTakesADialectsNameOrAuto(t *testing.T) {
	for _, name := range []string{"auto", "gp6", "gp7", "cloudberry", "postgresql", ""} {
		var d Dialect
		if err := d.UnmarshalText([]byte(name)); err != nil || string(d) != name {
			t.Errorf("UnmarshalText(%q) = %q, %v", name, d, err)
		}
	}
	for _, name := range []string{"gp5", "GP6", "greenplum", " gp6"} {
		d := GP7
		err := d.UnmarshalText([]byte(name))
		if err == nil || !strings.Contains(err.Error(), "want auto, gp6, gp7, cloudberry or postgresql") {
			t.Errorf("UnmarshalText(%q) = %v, want an error naming every allowed value", name, err)
		}
		if d != GP7 {
			t.Errorf("UnmarshalText(%q) changed the dialect to %q", name, d)
		}
	}
}

// Detect takes what the server says; whatever that is, it answers a known
// dialect or an error, never a panic, and the real servers' answers hold.
func FuzzDetect(f *testing.F) {
	for _, tc := range versions {
		f.Add(tc.version)
	}
	f.Add("PostgreSQL 9.4 (Greenplum Database 5.0)")
	f.Add("Greenplum Database 99999999999999999999.1")
	f.Fuzz(func(t *testing.T, version string) {
		d, err := Detect(version)
		if err == nil && !d.Known() {
			t.Fatalf("Detect(%q) = %q, no error, and not a known dialect", version, d)
		}
		if err != nil && d != "" {
			t.Fatalf("Detect(%q) = %q with error %v", version, d, err)
		}
		for _, tc := range versions {
			if version == tc.version && d != tc.want {
				t.Fatalf("Detect(%q) = %q, want %q", version, d, tc.want)
			}
		}
	})
}
