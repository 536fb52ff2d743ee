// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Command mutate breaks the rules the tests are meant to hold, one line at
// a time, and reports the mutations no test catches. Each mutation of the
// list (scripts/mutate/mutations.txt) replaces one text that occurs exactly
// once in one file of a copy of the repository, runs the tests it names
// there, and is caught when they fail; a mutation that does not compile is
// reported apart, since it proves nothing. Before any mutation, every test
// command of the list must pass on the unmutated copy.
//
//	go run ./scripts/mutate                      # every mutation
//	go run ./scripts/mutate -only 'clamp|auxv'   # those whose name matches
//	go run ./scripts/mutate -lock /tmp/gpotel-heavy.lock
//
// A mutation marked heavy (its tests start PostgreSQL) runs its tests with
// an exclusive flock on -lock when one is given, held for that test only;
// without -lock, heavy mutations are skipped. The report goes to the
// terminal and to -out; the exit status is 1 when a mutation survived or
// did not compile.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// mutation is one block of the list.
type mutation struct {
	name, file, from, to string
	test                 []string // packages, then go test flags
	heavy                bool
	line                 int // of its "name:" in the list
}

// outcome is what became of one mutation.
type outcome struct {
	m       mutation
	status  string   // caught, SURVIVED, did not compile, skipped, invalid
	failing []string // the tests that failed, for a caught one
	detail  string
}

func main() {
	list := flag.String("list", "scripts/mutate/mutations.txt", "the mutations")
	only := flag.String("only", "", "run only the mutations whose name matches this regular expression")
	lock := flag.String("lock", "", "a file to flock while a heavy mutation's tests run; without it heavy mutations are skipped")
	out := flag.String("out", "build/mutate.txt", "where the report is written too (relative: to the repository root)")
	timeout := flag.Duration("timeout", 20*time.Minute, "the bound of one test command")
	flag.Parse()
	if err := run(*list, *only, *lock, *out, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func run(listPath, only, lock, outPath string, timeout time.Duration) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	muts, err := readList(filepath.Join(root, listPath))
	if err != nil {
		return err
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return fmt.Errorf("-only: %w", err)
		}
		muts = slices.DeleteFunc(muts, func(m mutation) bool { return !re.MatchString(m.name) })
	}
	if len(muts) == 0 {
		return errors.New("no mutation to run")
	}
	copyDir, err := os.MkdirTemp("", "gpotel-mutate-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(copyDir) }()
	// Interrupted, the copy goes too.
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-interrupted
		_ = os.RemoveAll(copyDir)
		os.Exit(1)
	}()
	if err := copyTracked(root, copyDir); err != nil {
		return fmt.Errorf("copying the repository: %w", err)
	}
	fmt.Fprintf(os.Stderr, "mutate: %d mutations on a copy in %s\n", len(muts), copyDir)

	tester := &tester{dir: copyDir, lock: lock, timeout: timeout}
	// Every test command must pass unmutated, or its verdicts mean nothing.
	baseline := map[string]error{}
	for _, m := range muts {
		key := strings.Join(m.test, " ")
		if _, done := baseline[key]; done || (m.heavy && lock == "") {
			continue
		}
		res := tester.test(m)
		baseline[key] = res.err
		if res.err != nil {
			fmt.Fprintf(os.Stderr, "mutate: unmutated, go test %s fails: %v\n%s\n", key, res.err, tail(res.output, 3000))
		}
	}

	var outcomes []outcome
	for _, m := range muts {
		o := outcome{m: m}
		switch {
		case m.heavy && lock == "":
			o.status, o.detail = "skipped", "heavy: its tests start PostgreSQL; give -lock"
		case baseline[strings.Join(m.test, " ")] != nil:
			o.status, o.detail = "skipped", "its tests fail unmutated"
		default:
			o = tester.mutate(m)
		}
		fmt.Fprintf(os.Stderr, "mutate: %-9s %s%s\n", o.status, m.name, suffix(o))
		outcomes = append(outcomes, o)
	}
	report := render(outcomes)
	fmt.Print(report)
	if outPath != "" {
		if !filepath.IsAbs(outPath) {
			outPath = filepath.Join(root, outPath)
		}
		if err := os.MkdirAll(filepath.Dir(outPath), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(outPath, []byte(report), 0o644); err != nil {
			return err
		}
	}
	for _, o := range outcomes {
		if o.status == "SURVIVED" || o.status == "did not compile" || o.status == "invalid" {
			return errors.New("not every mutation was caught")
		}
	}
	return nil
}

func suffix(o outcome) string {
	switch {
	case len(o.failing) > 0:
		return " (" + strings.Join(o.failing, ", ") + ")"
	case o.detail != "":
		return " (" + o.detail + ")"
	}
	return ""
}

// render is the report: one line per mutation, grouped by status.
func render(outcomes []outcome) string {
	var b strings.Builder
	counts := map[string]int{}
	for _, o := range outcomes {
		counts[o.status]++
	}
	fmt.Fprintf(&b, "%d mutations: %d caught, %d survived, %d did not compile, %d invalid, %d skipped\n\n",
		len(outcomes), counts["caught"], counts["SURVIVED"], counts["did not compile"], counts["invalid"], counts["skipped"])
	for _, o := range outcomes {
		fmt.Fprintf(&b, "%-9s %s\n          %s:%s\n", o.status, o.m.name, o.m.file, strings.TrimSpace(o.m.from))
		switch {
		case len(o.failing) > 0:
			fmt.Fprintf(&b, "          failing: %s\n", strings.Join(o.failing, ", "))
		case o.detail != "":
			fmt.Fprintf(&b, "          %s\n", o.detail)
		}
	}
	return b.String()
}

type tester struct {
	dir     string
	lock    string
	timeout time.Duration
}

type testResult struct {
	output []byte
	err    error
}

// test runs the mutation's test command in the copy.
func (t *tester) test(m mutation) testResult {
	if m.heavy && t.lock != "" {
		f, err := os.OpenFile(t.lock, os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return testResult{err: fmt.Errorf("lock: %w", err)}
		}
		defer func() { _ = f.Close() }()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			return testResult{err: fmt.Errorf("lock: %w", err)}
		}
		defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-count=1"}, m.test...)...)
	cmd.Dir = t.dir
	out, err := cmd.CombinedOutput()
	return testResult{output: out, err: err}
}

var (
	failLine  = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)
	buildFail = regexp.MustCompile(`(?m)\[build failed\]|\[setup failed\]|^# \S+$`)
)

// mutate applies m to the copy, runs its tests and puts the file back.
// appliesTo tells whether m's text occurs exactly once in its file's src.
func (m mutation) appliesTo(src []byte) error {
	if n := bytes.Count(src, []byte(m.from)); n != 1 {
		return fmt.Errorf("the text occurs %d times in the file, want once", n)
	}
	return nil
}

func (t *tester) mutate(m mutation) outcome {
	o := outcome{m: m}
	path := filepath.Join(t.dir, m.file)
	orig, err := os.ReadFile(path)
	if err != nil {
		o.status, o.detail = "invalid", err.Error()
		return o
	}
	if err := m.appliesTo(orig); err != nil {
		o.status, o.detail = "invalid", err.Error()
		return o
	}
	if err := os.WriteFile(path, bytes.Replace(orig, []byte(m.from), []byte(m.to), 1), 0o644); err != nil {
		o.status, o.detail = "invalid", err.Error()
		return o
	}
	defer func() { _ = os.WriteFile(path, orig, 0o644) }()
	res := t.test(m)
	switch {
	case res.err == nil:
		o.status = "SURVIVED"
	case buildFail.Match(res.output) && !failLine.Match(res.output):
		o.status, o.detail = "did not compile", firstLines(res.output, 3)
	default:
		o.status = "caught"
		for _, sub := range failLine.FindAllSubmatch(res.output, -1) {
			name := string(sub[1])
			// A subtest's parent fails with it: name the deepest only.
			if !slices.ContainsFunc(o.failing, func(f string) bool { return strings.HasPrefix(f, name+"/") }) {
				o.failing = append(o.failing, name)
			}
		}
		o.failing = dropParents(o.failing)
		if len(o.failing) == 0 {
			o.detail = "go test failed without a failing test: " + firstLines(res.output, 2)
		}
	}
	return o
}

// dropParents keeps the deepest of names that are a test and its subtests.
func dropParents(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.ContainsFunc(names, func(o string) bool { return strings.HasPrefix(o, n+"/") }) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func firstLines(b []byte, n int) string {
	lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// readList parses the list: blocks of "key: value" lines separated by blank
// lines; "#" starts a comment line.
func readList(path string) ([]mutation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []mutation
	var cur *mutation
	var errs []error
	finish := func() {
		if cur == nil {
			return
		}
		switch {
		case cur.name == "" || cur.file == "" || cur.from == "" || len(cur.test) == 0:
			errs = append(errs, fmt.Errorf("%s:%d: a mutation needs name, file, from and test", path, cur.line))
		case cur.from == cur.to:
			errs = append(errs, fmt.Errorf("%s:%d: from and to are the same", path, cur.line))
		default:
			out = append(out, *cur)
		}
		cur = nil
	}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "#"):
			continue
		case strings.TrimSpace(line) == "":
			finish()
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			errs = append(errs, fmt.Errorf("%s:%d: want key: value", path, n))
			continue
		}
		if cur == nil {
			cur = &mutation{line: n}
		}
		value = strings.TrimPrefix(value, " ")
		switch key {
		case "name":
			cur.name = value
		case "file":
			cur.file = value
		case "from":
			cur.from = unescape(value)
		case "to":
			cur.to = unescape(value)
		case "test":
			cur.test = splitArgs(value)
		case "heavy":
			cur.heavy = value == "yes"
		default:
			errs = append(errs, fmt.Errorf("%s:%d: unknown key %q", path, n, key))
		}
	}
	finish()
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, errors.Join(errs...)
}

// unescape turns \t into a tab and \n into a newline, so that a text can
// begin with its indentation or span a few lines.
func unescape(s string) string {
	return strings.NewReplacer(`\t`, "\t", `\n`, "\n").Replace(s)
}

// splitArgs splits on blanks, keeping a single-quoted part whole.
func splitArgs(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, started := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, started = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if started {
				out = append(out, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteRune(r)
			started = true
		}
	}
	if started {
		out = append(out, cur.String())
	}
	return out
}

// copyTracked copies the files git tracks, as they are in the working tree
// (uncommitted edits included), into dst; bin/ is linked, not copied.
func copyTracked(root, dst string) error {
	cmd := exec.Command("git", "ls-files", "-z", "--cached")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, rel)
		fi, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if err := copyFile(src, filepath.Join(dst, rel), fi.Mode().Perm()); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(root, "bin")); err == nil {
		return os.Symlink(filepath.Join(root, "bin"), filepath.Join(dst, "bin"))
	}
	return nil
}

func copyFile(src, dst string, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// repoRoot walks up from the working directory to gpotel's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/gpotel/gpotel\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the gpotel module")
		}
		dir = parent
	}
}
