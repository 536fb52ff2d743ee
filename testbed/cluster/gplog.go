// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A Greenplum dialect's instances log the way a real Greenplum segment does:
// Greenplum's own CSV layout (30 columns, the process as p<pid>, its thread
// as th<n>, the session as con<n>, the segment as seg<n>, ...; read from
// Greenplum 6's elog.c and syslogger.c and a real 6.24.3 log) in
// <log_directory>/gpdb-%Y-%m-%d_%H%M%S.csv. PostgreSQL 15 cannot write it,
// so one converter process per cluster follows each instance's csvlog
// (….csv.csv in the same directory, see logSettings) and writes every record
// in Greenplum's layout into the file of the same name without the extra
// .csv. It is this package's binary run again with gplogEnv set (any binary
// that links the package: a test binary or gpotel-testbed), so it outlives
// `gpotel-testbed up`; its process title carries the cluster's tag, so Down
// ends it with the instances, and it ends itself when Dir is gone.
//
// Greenplum 7 and Cloudberry write the same layout, con<N> and cmd<M>
// included, as Greenplum 6 does; neither can be built here, so all three
// dialects get the layout read from 6, with no difference invented. The
// cmd<M> column stays empty: PostgreSQL's csvlog does not carry the title
// extension's count, so on the testbed a record matches by session and time.

// gplogEnv carries the converter's job.
const gplogEnv = "GPOTEL_TESTBED_GPLOG"

func init() {
	if job := os.Getenv(gplogEnv); job != "" {
		os.Exit(runGreenplumLog(job))
	}
}

// gplogJob is what the converter converts.
type gplogJob struct {
	Dir       string          `json:"dir"`
	UID       int             `json:"uid"`
	GID       int             `json:"gid"`
	Instances []gplogInstance `json:"instances"`
}

type gplogInstance struct {
	DataDir string `json:"data_dir"`
	Content int    `json:"content"`
}

// startGreenplumLog starts the converter when the instances write Greenplum's layout.
func (c *Cluster) startGreenplumLog() error {
	if c.LogDestination != LogGreenplumCSV {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("the Greenplum log converter: %w", err)
	}
	job := gplogJob{Dir: c.Dir, UID: c.account.uid, GID: c.account.gid}
	for _, in := range c.Instances() {
		job.Instances = append(job.Instances, gplogInstance{DataDir: in.DataDir, Content: in.Content})
	}
	spec, err := json.Marshal(job)
	if err != nil {
		return err
	}
	out, err := os.OpenFile(filepath.Join(c.Dir, "logs", "gplog-converter.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }()
	cmd := exec.Command(exe)
	cmd.Args = []string{fmt.Sprintf("gpotel-%s-seglog-converter", c.ID)} // the tag Processes looks for
	cmd.Env = append(os.Environ(), gplogEnv+"="+string(spec))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("the Greenplum log converter: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// runGreenplumLog converts until the cluster's Dir is gone.
func runGreenplumLog(spec string) int {
	var job gplogJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fmt.Fprintf(os.Stderr, "gplog: %s: %v\n", gplogEnv, err)
		return 2
	}
	convs := make([]*gplogConverter, len(job.Instances))
	for i, in := range job.Instances {
		convs[i] = &gplogConverter{in: in, uid: job.UID, gid: job.GID, thread: threadID(in.DataDir)}
	}
	reported := map[string]bool{}
	for {
		if _, err := os.Stat(job.Dir); err != nil {
			return 0
		}
		for _, g := range convs {
			if err := g.step(); err != nil && !reported[err.Error()] {
				reported[err.Error()] = true
				fmt.Fprintf(os.Stderr, "gplog %s: %v\n", g.in.DataDir, err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gplogConverter follows one instance's csvlog.
type gplogConverter struct {
	in       gplogInstance
	uid, gid int
	thread   int32
	src      string // the csvlog file being read
	f        *os.File
	off      int64
	out      *os.File
}

// step converts what was appended and follows a rotation.
func (g *gplogConverter) step() error {
	cur, err := csvlogFile(g.in.DataDir)
	if err != nil {
		return nil //nolint:nilerr // the instance is not up yet, or rotating
	}
	if cur != g.src {
		if g.f != nil {
			if err := g.convert(); err != nil {
				return err
			}
			_ = g.f.Close()
			_ = g.out.Close()
			g.f, g.out = nil, nil
		}
		if err := g.open(cur); err != nil {
			return err
		}
	}
	return g.convert()
}

func (g *gplogConverter) open(src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	name := strings.TrimSuffix(src, ".csv")
	out, err := os.OpenFile(name, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		_ = f.Close()
		return err
	}
	if os.Geteuid() == 0 {
		_ = out.Chown(g.uid, g.gid)
	}
	g.src, g.f, g.off, g.out = src, f, 0, out
	return nil
}

// convert writes every complete record appended since the last call.
func (g *gplogConverter) convert() error {
	st, err := g.f.Stat()
	if err != nil || st.Size() <= g.off {
		return err
	}
	data := make([]byte, st.Size()-g.off)
	n, err := g.f.ReadAt(data, g.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	data = data[:n]
	// A record ends at a newline; one cut inside a quoted field does not
	// parse and waits for the rest.
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	var out bytes.Buffer
	consumed := int64(0)
	for {
		rec, err := r.Read()
		if err != nil {
			break
		}
		g.writeRecord(&out, rec)
		consumed = r.InputOffset()
	}
	if consumed == 0 {
		return nil
	}
	if _, err := g.out.Write(out.Bytes()); err != nil {
		return err
	}
	g.off += consumed
	return nil
}

// PostgreSQL 15's csvlog columns the Greenplum layout takes.
const (
	pgLogTime = iota
	pgUser
	pgDatabase
	pgPID
	pgConnectionFrom
	_ // session_id
	_ // session_line_num
	_ // command_tag
	pgSessionStart
	_ // virtual_transaction_id
	pgTransactionID
	pgSeverity
	pgSQLState
	pgMessage
	pgDetail
	pgHint
	pgInternalQuery
	pgInternalQueryPos
	pgContext
	pgQuery
	pgQueryPos
	_ // location
	pgApplicationName
	pgColumns
)

// writeRecord writes one csvlog record in Greenplum's layout: a text field
// is quoted, an absent one empty, as Greenplum's syslogger writes them.
func (g *gplogConverter) writeRecord(w *bytes.Buffer, pg []string) {
	if len(pg) < pgColumns {
		return
	}
	host, port := pg[pgConnectionFrom], ""
	if i := strings.LastIndexByte(host, ':'); i > 0 && host != "[local]" {
		host, port = host[:i], host[i+1:]
	}
	session := ""
	if tag, ok := strings.CutPrefix(pg[pgApplicationName], SessionTagPrefix); ok {
		if n, _, _ := strings.Cut(tag, " "); n != "" && strings.Trim(n, "0123456789") == "" {
			session = "con" + n // the tag's number alone: the rest is the name shown
		}
	}
	started := pg[pgSessionStart]
	if pg[pgConnectionFrom] == "" {
		started = "" // Greenplum gives a start only to a client's process
	}
	fields := []string{
		microseconds(pg[pgLogTime]), quoted(pg[pgUser]), quoted(pg[pgDatabase]),
		"p" + pg[pgPID], "th" + strconv.Itoa(int(g.thread)), quoted(host), quoted(port),
		started, orZero(pg[pgTransactionID]),
		session, "", fmt.Sprintf("seg%d", g.in.Content), "", "", "", "", // con, cmd, seg, slice, dx, x, sx
		quoted(pg[pgSeverity]), quoted(pg[pgSQLState]), quoted(pg[pgMessage]), quoted(pg[pgDetail]),
		quoted(pg[pgHint]), quoted(pg[pgInternalQuery]), pg[pgInternalQueryPos], quoted(pg[pgContext]),
		quoted(pg[pgQuery]), orZero(pg[pgQueryPos]), "", "", "", "", // function, file, line, stack
	}
	w.WriteString(strings.Join(fields, ","))
	w.WriteByte('\n')
}

func quoted(s string) string {
	if s == "" {
		return ""
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// microseconds writes PostgreSQL's "2026-11-23 09:05:44.303 UTC" the way
// Greenplum does, "2026-11-23 09:05:44.303000 UTC".
func microseconds(ts string) string {
	if len(ts) >= 23 && ts[19] == '.' {
		return ts[:23] + "000" + ts[23:]
	}
	return ts
}

// threadID stands in for the thread id Greenplum prints: the same for
// every process of an instance, as they all fork from its postmaster.
func threadID(dataDir string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(dataDir))
	return int32(h.Sum32() | 1)
}

// csvlogFile is the csvlog file current_logfiles names.
func csvlogFile(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "current_logfiles"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if format, path, ok := strings.Cut(line, " "); ok && format == "csvlog" {
			if !filepath.IsAbs(path) {
				path = filepath.Join(dataDir, path)
			}
			return path, nil
		}
	}
	return "", fmt.Errorf("%s/current_logfiles names no csvlog file", dataDir)
}
