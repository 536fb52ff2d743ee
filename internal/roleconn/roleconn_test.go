// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package roleconn

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpotel/gpotel/internal/gpsql"
)

func TestProblemsNamesEachWrongSettingUnderThePrefix(t *testing.T) {
	s := Settings{Port: 70000, PasswordFile: "/a", PasswordEnv: "B", SSLMode: "sometimes"}
	msg := errors.Join(s.Problems("actions::", "the coordinator")...).Error()
	for _, want := range []string{`actions::host "": must be set (the coordinator, or its socket directory)`, "actions::port 70000",
		`actions::database ""`, `actions::user ""`, `actions::password_file "/a": password_env "B" is set too`, `actions::sslmode "sometimes"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("problems %q lack %q", msg, want)
		}
	}
	good := Settings{Host: "/tmp", Port: 5432, Database: "d", User: "u", SSLMode: "prefer"}
	if errs := good.Problems("", "the database server"); len(errs) != 0 {
		t.Errorf("good settings: %v", errs)
	}
}

func TestConnConfigReadsThePasswordFromItsSource(t *testing.T) {
	s := Settings{Host: "/tmp", Port: 5432, Database: "d", User: "u", SSLMode: "disable"}
	t.Setenv("ROLECONN_TEST_PASSWORD", "from-env")
	s.PasswordEnv = "ROLECONN_TEST_PASSWORD"
	cc, err := s.ConnConfig("gpotel-test")
	if err != nil || cc.Password != "from-env" || cc.RuntimeParams["application_name"] != "gpotel-test" {
		t.Fatalf("password_env: %v, %+v", err, cc)
	}
	s.PasswordEnv = "ROLECONN_TEST_UNSET"
	if _, err := s.ConnConfig("gpotel-test"); err == nil || !strings.HasPrefix(err.Error(), "password_env ROLECONN_TEST_UNSET: ") {
		t.Errorf("unset variable: %v", err)
	}
	s.PasswordEnv, s.PasswordFile = "", filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(s.PasswordFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cc, err := s.ConnConfig("gpotel-test"); err != nil || cc.Password != "from-file" {
		t.Fatalf("password_file: %v, %+v", err, cc)
	}
}

// The history's and the actions' connections run with gpotel's search_path
// whatever the role's own is.
func TestConnConfigPinsTheSearchPath(t *testing.T) {
	s := Settings{Host: "/tmp", Port: 5432, Database: "d", User: "u", SSLMode: "disable"}
	cc, err := s.ConnConfig("gpotel-test")
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.RuntimeParams["search_path"]; got != gpsql.SearchPath {
		t.Errorf("search_path %q, want %q", got, gpsql.SearchPath)
	}
}

func TestASecretFileOthersMayReadIsRefused(t *testing.T) {
	dir := t.TempDir()
	for name, file := range map[string]struct {
		content string
		mode    os.FileMode
	}{
		"group-readable": {"secret", 0o640},
		"huge":           {strings.Repeat("x", MaxSecretBytes+1), 0o600},
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(file.content), file.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, file.mode); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSecretFile(path); err == nil {
			t.Errorf("%s: read", name)
		}
	}
	if _, err := ReadSecretFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
}

// A secret file belongs to the reader or to root: as root, a 0600 file
// another user owns is that user's to write, and so not a secret of ours.
func TestASecretFileAnotherUserOwnsIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(path, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := 65534 // nobody
	if os.Geteuid() == other {
		other = 65533
	}
	if err := os.Chown(path, other, other); err != nil {
		t.Skipf("cannot give the file to another user (not root?): %v", err)
	}
	if _, err := ReadSecretFile(path); err == nil || !strings.Contains(err.Error(), "owned by uid") {
		t.Errorf("a 0600 file of uid %d, read by uid %d: %v; want it refused for its owner", other, os.Geteuid(), err)
	}
}
