// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package cluster starts a testbed: several PostgreSQL instances on loopback
// that together look like a Greenplum cluster (one coordinator, content -1, and
// segment instances grouped into emulated hosts), with a Greenplum-compatible
// catalog on top. See testbed/README.md for every object it installs.
package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpotel/gpotel/internal/dialect"
)

// SmallClusters is one small cluster of each dialect, for a test that
// must hold on every one: a host of segmentsPerHost segments for the
// Greenplum family, the one instance for PostgreSQL.
func SmallClusters(segmentsPerHost int) []Options {
	var out []Options
	for _, d := range dialect.All {
		if d.Greenplum() {
			out = append(out, Options{Hosts: 1, SegmentsPerHost: segmentsPerHost, Dialect: d})
		} else {
			out = append(out, Options{Dialect: d})
		}
	}
	return out
}

// Greenplum names, used in the description and in gp_segment_configuration.
const (
	CoordinatorHost    = "mdw"
	CoordinatorContent = -1
	// AdminRole is the superuser every DSN connects as.
	AdminRole = "gpadmin"
	// UserRole is an ordinary login role on every instance, for workloads that should not run as a superuser.
	UserRole = "gpuser"
	// Database holds the Greenplum catalog emulation.
	Database = "postgres"
	// SessionTagPrefix in a segment backend's application_name names the coordinator session it serves.
	SessionTagPrefix = "gpotel_sess="
	// MySessIDSQL returns the calling coordinator backend's sess_id.
	MySessIDSQL = "SELECT " + internalSchema + ".my_sess_id()"
	// descriptionFile is written into Dir by Up and read by Load.
	descriptionFile = "cluster.json"
)

// Options say what to start.
type Options struct {
	// Dir is where data dirs live; empty = a new temp dir, on tmpfs (/dev/shm)
	// when there is one, because creating data dirs on a loaded disk takes
	// ten times longer.
	Dir             string
	Hosts           int             // emulated segment hosts sdw1..sdwH (0 allowed for postgresql)
	SegmentsPerHost int             // primaries per segment host
	Dialect         dialect.Dialect // gp6, gp7, cloudberry or postgresql
	// LogDestination is the server log layout of every instance (LogStderr,
	// LogCSV, LogJSON, LogGreenplumCSV); empty = what the dialect's real
	// server writes (DefaultLogDestination).
	LogDestination string
	// Ephemeral ties the cluster to this process: a later Up removes it once
	// this process is gone (say, a test binary killed by its timeout before
	// its cleanup ran). Start sets it.
	Ephemeral bool
}

// Instance is one running PostgreSQL server.
type Instance struct {
	DBID          int    `json:"dbid"`
	Content       int    `json:"content"`
	Role          string `json:"role"`
	Host          string `json:"host"`
	Port          int    `json:"port"`
	DataDir       string `json:"data_dir"`
	DSN           string `json:"dsn"`
	PostmasterPID int    `json:"postmaster_pid"`
	// Stopped is set by StopSegment until StartSegment.
	Stopped bool `json:"stopped,omitempty"`
}

// Host is an emulated machine: its agent listens on AgentAddress.
type Host struct {
	Name         string `json:"name"`
	AgentAddress string `json:"agent_address"`
	Contents     []int  `json:"contents"`
}

// CatalogRow is a gp_segment_configuration row with no running instance behind it
// (the mirror and the down primary): code that routes to it is wrong.
type CatalogRow struct {
	DBID          int    `json:"dbid"`
	Content       int    `json:"content"`
	Role          string `json:"role"`
	PreferredRole string `json:"preferred_role"`
	Mode          string `json:"mode"`
	Status        string `json:"status"`
	Port          int    `json:"port"`
	Hostname      string `json:"hostname"`
	DataDir       string `json:"data_dir"`
}

// Description is what Up writes to Dir/cluster.json.
type Description struct {
	ID             string          `json:"id"`
	Dialect        dialect.Dialect `json:"dialect"`
	Dir            string          `json:"dir"`
	Coordinator    Instance        `json:"coordinator"`
	Segments       []Instance      `json:"segments"`
	Hosts          []Host          `json:"hosts"`
	CoordinatorDSN string          `json:"coordinator_dsn"`
	CatalogOnly    []CatalogRow    `json:"catalog_only,omitempty"`
	SocketDir      string          `json:"socket_dir"`
	// DiskDir holds the DiskTablespace of every instance on a disk-backed file
	// system (Dir itself may be tmpfs, where writes show no write_bytes).
	DiskDir   string    `json:"disk_dir"`
	PGBinDir  string    `json:"pg_bin_dir"`
	StartedAt time.Time `json:"started_at"`
	// Owner is the process an ephemeral cluster belongs to.
	Owner *Owner `json:"owner,omitempty"`
	// UpPhases says where Up spent its time.
	UpPhases []Phase `json:"up_phases,omitempty"`
	// Cgroups says where the instances' resource group cgroups are.
	Cgroups Cgroups `json:"cgroups"`
	// LogDestination is the server log layout every instance writes.
	LogDestination string `json:"log_destination"`
	// TitleLibrary is the title extension every instance of a Greenplum
	// dialect preloads (titles.go); empty for postgresql.
	TitleLibrary string `json:"title_library,omitempty"`
}

// Owner identifies a process across pid reuse.
type Owner struct {
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
}

// Phase is one timed step of Up.
type Phase struct {
	Name     string        `json:"name"`
	Duration time.Duration `json:"duration_ns"`
}

// Cluster is a running (or loaded) testbed.
type Cluster struct {
	Description
	account serverAccount
}

// Instances returns the coordinator followed by the segments.
func (d *Description) Instances() []Instance {
	return append([]Instance{d.Coordinator}, d.Segments...)
}

// Instance returns the instance with the given content id.
func (d *Description) Instance(content int) (Instance, bool) {
	for _, in := range d.Instances() {
		if in.Content == content {
			return in, true
		}
	}
	return Instance{}, false
}

// DataDirsOf lists the data directories of the instances on an emulated host.
func (d *Description) DataDirsOf(host string) []string {
	var out []string
	for _, in := range d.Instances() {
		if in.Host == host {
			out = append(out, in.DataDir)
		}
	}
	return out
}

// HostOf names the emulated host a content id lives on.
func (d *Description) HostOf(content int) string {
	for _, h := range d.Hosts {
		for _, c := range h.Contents {
			if c == content {
				return h.Name
			}
		}
	}
	return ""
}

// JSON renders the description as indented JSON.
func (d *Description) JSON() []byte {
	b, _ := json.MarshalIndent(d, "", "  ")
	return append(b, '\n')
}

func (o Options) validate() error {
	var errs []error
	switch {
	case !o.Dialect.Known():
		errs = append(errs, fmt.Errorf("unknown dialect %q (want %s)", o.Dialect, dialect.Names(false)))
	case o.Dialect.Greenplum():
		if o.Hosts < 1 {
			errs = append(errs, fmt.Errorf("dialect %s needs at least one segment host, got %d", o.Dialect, o.Hosts))
		}
	case o.Hosts < 0:
		errs = append(errs, fmt.Errorf("hosts must not be negative, got %d", o.Hosts))
	}
	if o.Hosts > 0 && o.SegmentsPerHost < 1 {
		errs = append(errs, fmt.Errorf("segments per host must be at least 1 when hosts > 0, got %d", o.SegmentsPerHost))
	}
	if o.Hosts > 200 {
		errs = append(errs, fmt.Errorf("at most 200 hosts fit the 127.0.0.x agent addresses, got %d", o.Hosts))
	}
	if _, err := o.logDestination(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Up initialises and starts a cluster; on failure nothing is left running.
func Up(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	account, err := lookupServerAccount()
	if err != nil {
		return nil, err
	}
	dir, err := prepareDir(opts.Dir, account)
	if err != nil {
		return nil, err
	}
	c := &Cluster{account: account}
	c.ID = newID()
	c.Dialect = opts.Dialect
	c.LogDestination, _ = opts.logDestination()
	c.Dir = dir
	c.PGBinDir = bin
	c.SocketDir = filepath.Join(dir, "sock")
	if c.DiskDir, err = diskDir(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c.plan(opts)
	c.planCgroups()
	if opts.Ephemeral {
		c.Owner = &Owner{PID: os.Getpid(), StartTicks: processStartTicks(os.Getpid())}
	}
	reapOrphans()
	if err := c.create(ctx); err != nil {
		downErr := c.Down(context.WithoutCancel(ctx))
		return nil, errors.Join(fmt.Errorf("testbed up in %s: %w", dir, err), downErr)
	}
	return c, nil
}

func prepareDir(dir string, account serverAccount) (string, error) {
	if dir == "" {
		base := ""
		if isTmpfs("/dev/shm") && account.checkReachable("/dev/shm") == nil {
			base = "/dev/shm"
		}
		d, err := os.MkdirTemp(base, "gpotel-testbed-")
		if err != nil {
			return "", err
		}
		dir = d
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(abs, descriptionFile)); err == nil {
		return "", fmt.Errorf("%s already holds a testbed (run `gpotel-testbed down --dir %s` first)", abs, abs)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(abs, 0o755); err != nil {
		return "", err
	}
	if err := account.checkReachable(abs); err != nil {
		return "", err
	}
	return abs, nil
}

// diskDir picks where the disk tablespaces go: inside Dir when Dir is on a
// disk, else a new directory under the system temp dir.
func diskDir(dir string) (string, error) {
	if !isTmpfs(dir) {
		return filepath.Join(dir, "disk"), nil
	}
	return os.MkdirTemp("", "gpotel-testbed-disk-")
}

func isTmpfs(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.TMPFS_MAGIC
}

func newID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// plan lays out instances, hosts and decoy catalog rows before anything starts.
func (c *Cluster) plan(opts Options) {
	c.Coordinator = Instance{DBID: 1, Content: CoordinatorContent, Role: "p", Host: CoordinatorHost,
		DataDir: filepath.Join(c.Dir, CoordinatorHost, "gpseg-1")}
	c.Hosts = []Host{{Name: CoordinatorHost, AgentAddress: "127.0.0.10", Contents: []int{CoordinatorContent}}}
	content := 0
	for h := 1; h <= opts.Hosts; h++ {
		host := Host{Name: fmt.Sprintf("sdw%d", h), AgentAddress: fmt.Sprintf("127.0.0.%d", 10+h)}
		for s := 0; s < opts.SegmentsPerHost; s++ {
			c.Segments = append(c.Segments, Instance{DBID: content + 2, Content: content, Role: "p", Host: host.Name,
				DataDir: filepath.Join(c.Dir, host.Name, fmt.Sprintf("gpseg%d", content))})
			host.Contents = append(host.Contents, content)
			content++
		}
		c.Hosts = append(c.Hosts, host)
	}
	if !c.Dialect.Greenplum() || len(c.Segments) == 0 {
		return
	}
	n := len(c.Segments)
	c.CatalogOnly = []CatalogRow{
		// A mirror of content 0: never a backend host for content 0.
		{DBID: n + 2, Content: 0, Role: "m", PreferredRole: "m", Mode: "s", Status: "u", Port: 1,
			Hostname: "sdw-mirror", DataDir: "/nonexistent/mirror/gpseg0"},
		// A primary that is down, with a content id no running instance has.
		{DBID: n + 3, Content: n, Role: "p", PreferredRole: "p", Mode: "n", Status: "d", Port: 2,
			Hostname: "sdw-down", DataDir: fmt.Sprintf("/nonexistent/primary/gpseg%d", n)},
	}
}

func (c *Cluster) create(ctx context.Context) error {
	// An early description lets Down (or the orphan reaper) clean up a half-made cluster.
	if err := c.save(); err != nil {
		return err
	}
	for _, d := range []string{c.SocketDir, filepath.Join(c.Dir, "logs"), c.DiskDir} {
		if err := c.account.mkdirOwned(d, 0o755); err != nil {
			return err
		}
	}
	for _, h := range c.Hosts {
		if err := c.account.mkdirOwned(filepath.Join(c.Dir, h.Name), 0o755); err != nil {
			return err
		}
	}
	if err := c.startGreenplumLog(); err != nil {
		return err
	}
	if c.Dialect.Greenplum() {
		begin := time.Now()
		lib, err := c.buildTitleExtension(ctx)
		if err != nil {
			return err
		}
		c.TitleLibrary = lib
		c.UpPhases = append(c.UpPhases, Phase{"title extension", time.Since(begin)})
	}
	for _, step := range []struct {
		name string
		run  func(context.Context) error
	}{{"instances", c.bringUpInstances}, {"coordinator catalog", c.installCoordinatorCatalog}} {
		begin := time.Now()
		if err := step.run(ctx); err != nil {
			return err
		}
		c.UpPhases = append(c.UpPhases, Phase{step.name, time.Since(begin)})
	}
	c.StartedAt = time.Now().UTC()
	return c.save()
}

// save writes the description; Load and `gpotel-testbed down` read it.
func (c *Cluster) save() error {
	c.CoordinatorDSN = c.Coordinator.DSN
	tmp := filepath.Join(c.Dir, descriptionFile+".tmp")
	if err := os.WriteFile(tmp, c.JSON(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(c.Dir, descriptionFile))
}

// Load reads the description Up wrote to dir.
func Load(dir string) (*Cluster, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(abs, descriptionFile))
	if err != nil {
		return nil, fmt.Errorf("no testbed in %s: %w", abs, err)
	}
	c := &Cluster{}
	if err := json.Unmarshal(b, &c.Description); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(abs, descriptionFile), err)
	}
	if c.account, err = lookupServerAccount(); err != nil {
		return nil, err
	}
	return c, nil
}

// Start is Up for tests: the cluster goes down in t.Cleanup, also when the test fails.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if _, err := postgresBin(); err != nil {
		t.Fatalf("testbed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	begin := time.Now()
	opts.Ephemeral = true
	c, err := Up(ctx, opts)
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Down(ctx); err != nil {
			t.Errorf("testbed down: %v", err)
		}
	})
	t.Logf("testbed %s (%s, 1+%d instances) up in %v at %s", c.ID, c.Dialect, len(c.Segments), time.Since(begin).Round(time.Millisecond), c.Dir)
	return c
}

// processStartTicks is field 22 of /proc/<pid>/stat, 0 when the process is gone.
func processStartTicks(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}
