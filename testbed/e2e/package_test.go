// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
	"github.com/gpotel/gpotel/testbed/cluster"
)

// packages is what `make package` made, once for the package's tests.
var packages struct {
	once               sync.Once
	dir, version, arch string
	err                error
}

// builtPackages runs `make package` once and returns where the packages are
// and their version and architecture.
func builtPackages(t *testing.T) (dir, version, arch string) {
	t.Helper()
	for _, tool := range []string{"systemd-analyze", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (make testbed-deps installs it): %v", tool, err)
		}
	}
	packages.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if packages.err = run(ctx, root, "make", "package"); packages.err != nil {
			return
		}
		packages.version = strings.TrimSpace(mustOutput(t, "sed", "-n", "s/^  version: //p", filepath.Join(root, "builder-config.yaml")))
		packages.arch = strings.TrimSpace(mustOutput(t, "go", "env", "GOARCH"))
		packages.dir = filepath.Join(root, "build", "packages")
	})
	if packages.err != nil {
		t.Fatal(packages.err)
	}
	return packages.dir, packages.version, packages.arch
}

// unpackedPackages unpacks both .debs into temporary roots, each with the
// system's own units beside the packaged one (systemd-analyze --root needs
// the targets they name).
func unpackedPackages(t *testing.T) (agentRoot, collectorRoot string) {
	t.Helper()
	pkgs, version, arch := builtPackages(t)
	agentRoot = unpackDeb(t, filepath.Join(pkgs, "gpotel-agent_"+version+"_"+arch+".deb"))
	collectorRoot = unpackDeb(t, filepath.Join(pkgs, "otelcol-gpotel_"+version+"_"+arch+".deb"))
	for _, dir := range []string{agentRoot, collectorRoot} {
		if out, err := exec.Command("cp", "-rn", "/lib/systemd/system/.", filepath.Join(dir, "lib/systemd/system")).CombinedOutput(); err != nil {
			t.Fatalf("copy the system's units: %v\n%s", err, out)
		}
	}
	return agentRoot, collectorRoot
}

// TestPackagesInstallAndStart builds the packages with `make package`,
// verifies their systemd units with systemd-analyze, unpacks the .debs and
// runs what they hold with the configuration they ship.
func TestPackagesInstallAndStart(t *testing.T) {
	needBinaries(t)
	pkgs, version, arch := builtPackages(t)
	for _, name := range []string{"gpotel-agent", "otelcol-gpotel"} {
		rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[arch]
		for _, f := range []string{name + "_" + version + "_" + arch + ".deb", name + "-" + version + "-1." + rpmArch + ".rpm"} {
			st, err := os.Stat(filepath.Join(pkgs, f))
			if err != nil || st.Size() < 1<<20 {
				t.Fatalf("make package did not make %s (%v)", f, err)
			}
			t.Logf("%s: %.1f MiB", f, float64(st.Size())/(1<<20))
		}
	}
	agentRoot, collectorRoot := unpackedPackages(t)

	t.Run("systemd-analyze verify accepts the units", func(t *testing.T) {
		for dir, unit := range map[string]string{agentRoot: "gpotel-agent.service", collectorRoot: "otelcol-gpotel.service"} {
			out, err := exec.Command("systemd-analyze", "verify", "--root="+dir, unit).CombinedOutput()
			if err != nil || len(strings.TrimSpace(string(out))) > 0 {
				t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
			}
		}
	})

	t.Run("the unpacked collector validates its packaged config", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		env := readEnvFile(t, filepath.Join(collectorRoot, "etc/gpotel/otelcol-gpotel.env"))
		cmd := exec.CommandContext(ctx, filepath.Join(collectorRoot, "usr/bin/otelcol-gpotel"), "validate", "--config", filepath.Join(collectorRoot, "etc/gpotel/otelcol-gpotel.yaml"))
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("validate the packaged config with the packaged environment %v: %v\n%s", env, err, out)
		}
	})
}

// maxExposure bounds systemd-analyze security's overall exposure of a packaged unit.
const maxExposure = 2.5

// secretsOfTheServiceUser are what a process listening on the network must
// not read in its user's home: the cluster-wide SSH keys and the password file.
var secretsOfTheServiceUser = []string{".ssh", ".pgpass"}

// TestPackagedUnitsHideSecretsAndReachTheSocket holds both packaged units to
// what they must not expose (their systemd-analyze security exposure, the
// service user's SSH keys and password file out of reach, memory bounded
// and the first to go under memory pressure, no capability beyond the
// agent's CAP_NET_ADMIN), and runs the packaged agent with the packaged
// configuration as the unit would (the database's OS user, a private /tmp)
// against a server whose socket is in /tmp, as on Greenplum and Cloudberry
// hosts: it answers for a backend, denies what is no database process, and
// reads the backend's memory contexts.
func TestPackagedUnitsHideSecretsAndReachTheSocket(t *testing.T) {
	needBinaries(t)
	agentRoot, collectorRoot := unpackedPackages(t)
	units := map[string]string{"gpotel-agent.service": agentRoot, "otelcol-gpotel.service": collectorRoot}

	t.Run("systemd-analyze security", func(t *testing.T) {
		for unit, dir := range units {
			out, err := exec.Command("systemd-analyze", "security", "--offline=true", "--root="+dir, unit).CombinedOutput()
			if err != nil {
				t.Fatalf("systemd-analyze security %s: %v\n%s", unit, err, out)
			}
			m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
			if m == nil {
				t.Fatalf("no overall exposure for %s in:\n%s", unit, out)
			}
			score, _ := strconv.ParseFloat(string(m[1]), 64)
			t.Logf("systemd-analyze security %s: overall exposure %.1f", unit, score)
			if score > maxExposure {
				t.Errorf("%s: exposure %.1f, more than %.1f", unit, score, maxExposure)
			}
		}
	})

	t.Run("the units' view of the file system", func(t *testing.T) {
		for unit, dir := range units {
			checkUnitSandbox(t, unit, readUnit(t, filepath.Join(dir, "lib/systemd/system", unit)))
		}
	})

	t.Run("the started units' view of the file system", func(t *testing.T) {
		if _, err := os.Stat("/run/systemd/system"); err != nil {
			t.Skip("systemd is not PID 1 here: no unit can be started (the properties are checked above)")
		}
		for unit, dir := range units {
			checkUnitSandboxRunning(t, unit, readUnit(t, filepath.Join(dir, "lib/systemd/system", unit)))
		}
	})

	t.Run("the packaged agent answers and reads memory contexts through a socket in /tmp", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("running the agent as the database's OS user in a private /tmp needs root")
		}
		checkPackagedAgentReachesTheSocket(t, outsideTmp(t, agentRoot))
	})
}

// unitService is the [Service] section of a unit file: every key's values,
// each line's blank-separated words in order.
type unitService map[string][]string

func readUnit(t *testing.T, path string) unitService {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svc := unitService{}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			svc[k] = append(svc[k], strings.Fields(v)...)
		}
	}
	return svc
}

func (u unitService) last(key string) string {
	if v := u[key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// inaccessible reports whether InaccessiblePaths names path ("-": ignored when absent).
func (u unitService) inaccessible(path string) bool {
	for _, p := range u["InaccessiblePaths"] {
		if strings.TrimLeft(p, "-+") == path {
			return true
		}
	}
	return false
}

// serviceUsers are the unit's User= and the database user docs/rollout.md
// tells PostgreSQL hosts to override it with.
func (u unitService) serviceUsers() []string {
	return []string{u.last("User"), "postgres"}
}

// checkUnitSandbox checks what the unit's properties promise.
func checkUnitSandbox(t *testing.T, unit string, svc unitService) {
	t.Helper()
	for _, name := range svc.serviceUsers() {
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatalf("%s runs as %s, who is not on this machine: %v", unit, name, err)
		}
		for _, secret := range secretsOfTheServiceUser {
			if path := filepath.Join(u.HomeDir, secret); !svc.inaccessible(path) {
				t.Errorf("%s: %s's %s is readable (InaccessiblePaths lacks it): %v", unit, name, path, svc["InaccessiblePaths"])
			}
		}
	}
	if got := svc.last("PrivateTmp"); got != "yes" {
		t.Errorf("%s: PrivateTmp=%q, want yes", unit, got)
	}
	if got := svc.last("ProtectHome"); got != "read-only" && got != "yes" && got != "tmpfs" {
		t.Errorf("%s: ProtectHome=%q", unit, got)
	}
	if limit := svc.last("MemoryMax"); limit == "" || limit == "infinity" {
		t.Errorf("%s: no MemoryMax on a database host", unit)
	}
	if adj, err := strconv.Atoi(svc.last("OOMScoreAdjust")); err != nil || adj <= 0 {
		t.Errorf("%s: OOMScoreAdjust=%q: the OOM killer must pick gpotel before a backend", unit, svc.last("OOMScoreAdjust"))
	}
	want := map[string]string{"gpotel-agent.service": "CAP_NET_ADMIN", "otelcol-gpotel.service": ""}[unit]
	if got := strings.Join(svc["CapabilityBoundingSet"], " "); got != want {
		t.Errorf("%s: CapabilityBoundingSet=%q, want %q", unit, got, want)
	}
}

// checkUnitSandboxRunning starts a transient unit with the unit's sandbox
// and user, where systemd runs, and looks at the secrets from inside; a
// secret that does not exist is planted for the check and removed after.
func checkUnitSandboxRunning(t *testing.T, unit string, svc unitService) {
	t.Helper()
	name := svc.last("User")
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	var checks []string
	for _, secret := range secretsOfTheServiceUser {
		path := filepath.Join(u.HomeDir, secret)
		if _, err := os.Lstat(path); os.IsNotExist(err) {
			if err := os.WriteFile(path, []byte("planted by "+t.Name()+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			_ = os.Chown(path, uid, gid)
			t.Cleanup(func() { _ = os.Remove(path) })
		}
		checks = append(checks, "test ! -r "+path)
	}
	args := []string{"--wait", "--pipe", "--quiet", "-p", "User=" + name}
	for _, key := range []string{"InaccessiblePaths", "ProtectHome", "ProtectSystem", "PrivateTmp"} {
		for _, v := range svc[key] {
			args = append(args, "-p", key+"="+v)
		}
	}
	args = append(args, "--", "sh", "-c", strings.Join(checks, " && "))
	if out, err := exec.Command("systemd-run", args...).CombinedOutput(); err != nil {
		t.Errorf("%s: inside the unit's sandbox, %s: %v\n%s", unit, strings.Join(checks, " && "), err, out)
	}
}

// outsideTmp copies an unpacked package where a private /tmp does not hide
// it (t.TempDir is under /tmp), readable by the database's OS user.
func outsideTmp(t *testing.T, unpacked string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "gpotel-package-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", unpacked+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v\n%s", unpacked, err, out)
	}
	return dir
}

// checkPackagedAgentReachesTheSocket runs the unpacked agent with the
// packaged configuration, as the unit does (the instances' OS user, a
// private /tmp), against a server whose Unix socket is in the host's /tmp.
func checkPackagedAgentReachesTheSocket(t *testing.T, agentRoot string) {
	c := cluster.Start(t, cluster.Options{Dialect: dialect.PostgreSQL})
	ctx := await.Context(t)
	if err := execAs(ctx, c.Coordinator.DSN, "ALTER SYSTEM SET unix_socket_directories = '/tmp'"); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartCoordinator(ctx); err != nil {
		t.Fatal(err)
	}
	socket := fmt.Sprintf("/tmp/.s.PGSQL.%d", c.Coordinator.Port)
	if fi, err := os.Stat(socket); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the restarted server has no socket %s: %v", socket, err)
	}
	backend, err := pgx.Connect(ctx, c.Coordinator.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = backend.Close(context.Background()) }()
	var pid int64
	if err := backend.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	owner, err := instanceOwner(c.Coordinator.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := user.Lookup(owner)
	if err != nil {
		t.Fatal(err)
	}

	port, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "127.0.0.1:" + strconv.Itoa(port)
	// The unit's User= and PrivateTmp=yes: a mount namespace with its own
	// /tmp (which must not show the socket), then the database's OS user.
	// Only the port and the instance to inspect are added to the packaged
	// config (its memory_contexts are off until data directories are named).
	sandbox := `mount -t tmpfs -o mode=1777 gpotel-private-tmp /tmp && test ! -e ` + socket +
		` && exec setpriv --reuid=` + u.Uid + ` --regid=` + u.Gid + ` --init-groups -- "$0" "$@"`
	agent, err := StartProcess("packaged agent", filepath.Join(t.TempDir(), "agent.log"), nil,
		"unshare", "--mount", "--propagation", "private", "--", "sh", "-c", sandbox,
		filepath.Join(agentRoot, "usr/bin/gpotel-agent"), "--config", filepath.Join(agentRoot, "etc/gpotel/agent.yaml"),
		"--listen", endpoint, "--memory-contexts-data-dirs", c.Coordinator.DataDir, "--memory-contexts-database-user", cluster.AdminRole)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Stop(15 * time.Second) })
	if err := waitListening(agent, endpoint, time.Minute); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	health, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || health.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", health, err)
	}

	resp, err := yagpcc.NewGetQueryInfoClient(conn).GetPidProcStat(ctx, &yagpcc.GetPidProcInfoReq{
		SegmentProcess: []*yagpcc.SegmentProcess{{Pid: pid}, {Pid: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sum := resp.GetSummary()
	t.Logf("packaged agent: %d answered, %d denied of %d; host %s", sum.GetAnswered(), sum.GetDenied(), sum.GetRequested(), resp.GetHost().GetHostname())
	if sum.GetAnswered() != 1 || sum.GetDenied() != 1 || len(resp.GetPidProcData()) != 1 || resp.GetPidProcData()[0].GetPid() != pid {
		t.Errorf("want the backend answered and pid 1 (root's, no postmaster's child) denied: %v", sum)
	}

	mc, err := gpotelv1.NewMemoryContextsClient(conn).GetMemoryContexts(ctx, &gpotelv1.GetMemoryContextsRequest{Pid: pid, Summary: true})
	if err != nil {
		t.Fatalf("memory contexts of backend %d through %s, from a private /tmp: %v\nagent log: %s", pid, socket, err, agent.LogTail(2000))
	}
	t.Logf("memory contexts of backend %d: %d rows from %s, grand total %d bytes", pid, len(mc.GetContexts()), mc.GetSource(), mc.GetGrandTotal().GetTotalBytes())
	if len(mc.GetContexts()) == 0 || mc.GetContexts()[0].GetName() != "TopMemoryContext" {
		t.Errorf("want TopMemoryContext first: %v", mc.GetContexts())
	}
}

// selfAsPostmaster writes a postmaster.pid naming this test binary, for an
// agent's postmaster_pid_files: the processes the test starts (processOf)
// are then children of a postmaster, as the agent requires.
func selfAsPostmaster(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "postmaster.pid")
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// processOf starts a process owned by u that lives until the test ends, and returns its pid.
func processOf(t *testing.T, u *user.User) int {
	t.Helper()
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	p := exec.Command("sleep", "3600")
	p.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Process.Kill(); _ = p.Wait() })
	return p.Process.Pid
}

func unpackDeb(t *testing.T, deb string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-x", deb, dir).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, out)
	}
	return dir
}

func mustOutput(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return string(out)
}

// readEnvFile reads a systemd EnvironmentFile of KEY=VALUE lines.
func readEnvFile(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var env []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			env = append(env, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env
}
