package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

// TestPackagesInstallAndStart builds the packages with `make package`,
// verifies their systemd units with systemd-analyze, unpacks the .debs and
// runs what they hold with the configuration they ship.
func TestPackagesInstallAndStart(t *testing.T) {
	needBinaries(t)
	for _, tool := range []string{"systemd-analyze", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (make testbed-deps installs it): %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := run(ctx, root, "make", "package"); err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(mustOutput(t, "sed", "-n", "s/^  version: //p", filepath.Join(root, "builder-config.yaml")))
	arch := strings.TrimSpace(mustOutput(t, "go", "env", "GOARCH"))
	pkgs := filepath.Join(root, "build", "packages")
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

	agentRoot := unpackDeb(t, filepath.Join(pkgs, "gpotel-agent_"+version+"_"+arch+".deb"))
	collectorRoot := unpackDeb(t, filepath.Join(pkgs, "otelcol-gpotel_"+version+"_"+arch+".deb"))

	t.Run("systemd-analyze verify accepts the units", func(t *testing.T) {
		for dir, unit := range map[string]string{agentRoot: "gpotel-agent.service", collectorRoot: "otelcol-gpotel.service"} {
			// The root needs the system's own targets (multi-user, network-online) beside the unit.
			if out, err := exec.Command("cp", "-rn", "/lib/systemd/system/.", filepath.Join(dir, "lib/systemd/system")).CombinedOutput(); err != nil {
				t.Fatalf("copy the system's units: %v\n%s", err, out)
			}
			out, err := exec.Command("systemd-analyze", "verify", "--root="+dir, unit).CombinedOutput()
			if err != nil || len(strings.TrimSpace(string(out))) > 0 {
				t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
			}
		}
	})

	t.Run("the unpacked agent answers with the packaged config", func(t *testing.T) {
		dbUser, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("the packaged config allows postgres and gpadmin; no postgres user here: %v", err)
		}
		// A process of the database user, as a backend would be.
		backend := processOf(t, dbUser)

		port, err := freePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		endpoint := "127.0.0.1:" + strconv.Itoa(port)
		// Only the port differs from the packaged config: 1433 may be taken on a shared machine.
		agent, err := StartProcess("packaged agent", filepath.Join(t.TempDir(), "agent.log"), nil,
			filepath.Join(agentRoot, "usr/bin/gpotel-agent"), "--config", filepath.Join(agentRoot, "etc/gpotel/agent.yaml"), "--listen", endpoint)
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
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		defer ccancel()
		health, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
		if err != nil || health.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health: %v %v", health, err)
		}
		resp, err := yagpcc.NewGetQueryInfoClient(conn).GetPidProcStat(cctx, &yagpcc.GetPidProcInfoReq{
			SegmentProcess: []*yagpcc.SegmentProcess{{Pid: int64(backend)}, {Pid: 1}},
		})
		if err != nil {
			t.Fatal(err)
		}
		sum := resp.GetSummary()
		t.Logf("packaged agent: %d answered, %d denied of %d; host %s", sum.GetAnswered(), sum.GetDenied(), sum.GetRequested(), resp.GetHost().GetHostname())
		if sum.GetAnswered() != 1 || sum.GetDenied() != 1 || len(resp.GetPidProcData()) != 1 || resp.GetPidProcData()[0].GetPid() != int64(backend) {
			t.Errorf("want the postgres process answered and pid 1 (root) denied: %v", resp.GetSummary())
		}
	})

	t.Run("the unpacked collector validates its packaged config", func(t *testing.T) {
		env := readEnvFile(t, filepath.Join(collectorRoot, "etc/gpotel/otelcol-gpotel.env"))
		cmd := exec.CommandContext(ctx, filepath.Join(collectorRoot, "usr/bin/otelcol-gpotel"), "validate", "--config", filepath.Join(collectorRoot, "etc/gpotel/otelcol-gpotel.yaml"))
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("validate the packaged config with the packaged environment %v: %v\n%s", env, err, out)
		}
	})
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
