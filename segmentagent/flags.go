// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"go.opentelemetry.io/collector/config/configtls"

	"github.com/gpotel/gpotel/segmentagent/cgroup"
)

// ConfigFromArgs builds the agent's configuration from command-line
// arguments: the defaults, then the YAML file named by --config, then every
// flag that was given. It returns flag.ErrHelp for -h.
func ConfigFromArgs(args []string, output io.Writer) (Config, error) {
	fs := flag.NewFlagSet("gpotel-agent", flag.ContinueOnError)
	fs.SetOutput(output)
	def := NewDefaultConfig()
	usersUsage := "comma-separated user names or uids whose processes may be read (default: " +
		strings.Join(DefaultAllowedUsers, ",") + ", those that exist)"
	clientsUsage := "comma-separated client certificate names (subject CN or SAN) that may call the agent under mTLS (default: " +
		strings.Join(DefaultAllowedClients, ",") + ")"
	groupsUsage := "comma-separated directories resource groups live under (default: " +
		strings.Join(cgroup.DefaultResourceGroupParents, ",") + ")"
	var (
		configPath   = fs.String("config", "", "YAML configuration file; flags override it")
		listen       = fs.String("listen", def.ListenAddress, "gRPC listen address host:port")
		procRoot     = fs.String("proc-root", def.ProcRoot, "procfs root")
		sysRoot      = fs.String("sys-root", def.SysRoot, "sysfs root (the host's online CPUs)")
		allowedUsers = fs.String("allowed-users", "", usersUsage)
		pidFiles     = fs.String("postmaster-pid-files", "", "comma-separated postmaster.pid files whose owners may be read")
		maxPids      = fs.Int("max-pids-per-request", def.MaxPidsPerRequest, "most pids one request may name")
		parallelism  = fs.Int("read-parallelism", 0, "goroutines reading one request (0: GOMAXPROCS)")
		hostname     = fs.String("hostname", "", "host name to report (default: the kernel's)")
		promAddr     = fs.String("prometheus-listen", "", "serve the agent's own metrics as Prometheus text on this host:port")
		certFile     = fs.String("tls-cert-file", "", "server certificate (PEM); enables TLS")
		keyFile      = fs.String("tls-key-file", "", "server private key (PEM)")
		clientCA     = fs.String("tls-client-ca-file", "", "CA that client certificates must chain to; enables mTLS")
		allowedCli   = fs.String("allowed-clients", "", clientsUsage)
		insecure     = fs.Bool("insecure", false, "allow plaintext gRPC, or TLS without client certificates, on a non-loopback listen address")
		maxRecv      = fs.Int("max-recv-msg-size-mib", def.MaxRecvMsgSizeMiB, "largest request, MiB")
		maxSend      = fs.Int("max-send-msg-size-mib", def.MaxSendMsgSizeMiB, "largest answer, MiB")
		logLevel     = fs.String("log-level", def.LogLevel, "debug, info, warn or error")
		useTaskstats = fs.Bool("taskstats", def.Taskstats.Enabled, "taskstats records and exit records (needs CAP_NET_ADMIN)")
		exitBuffer   = fs.Int("exit-buffer-size", def.Taskstats.ExitBufferSize, "exit records kept")
		exitMaxAge   = fs.Duration("exit-max-age", def.Taskstats.ExitMaxAge, "exit records older than this are dropped (the collector's longest window)")
		memDataDirs  = fs.String("memory-contexts-data-dirs", "", "comma-separated data directories whose backends GetMemoryContexts may inspect")
		memUser      = fs.String("memory-contexts-database-user", "", "database role of the local connection (default: the agent's OS user)")
		memInterval  = fs.Duration("memory-contexts-min-interval", def.MemoryContexts.MinInterval, "at most one GetMemoryContexts per pid in this interval")
		noCgroups    = fs.Bool("cgroups-disabled", false, "leave host pressure, control groups and their task states out of answers")
		rgParents    = fs.String("resource-group-parents", "", groupsUsage)
	)
	if err := fs.Parse(args); err != nil {
		return def, err
	}
	if fs.NArg() > 0 {
		return def, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := def
	if *configPath != "" {
		var err error
		if cfg, err = LoadConfig(*configPath); err != nil {
			return cfg, err
		}
	}
	tls := func() *configtls.ServerConfig {
		if cfg.TLS == nil {
			t := configtls.NewDefaultServerConfig()
			cfg.TLS = &t
		}
		return cfg.TLS
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "listen":
			cfg.ListenAddress = *listen
		case "proc-root":
			cfg.ProcRoot = *procRoot
		case "sys-root":
			cfg.SysRoot = *sysRoot
		case "allowed-users":
			cfg.AllowedUsers = splitList(*allowedUsers)
		case "postmaster-pid-files":
			cfg.PostmasterPidFiles = splitList(*pidFiles)
		case "max-pids-per-request":
			cfg.MaxPidsPerRequest = *maxPids
		case "read-parallelism":
			cfg.ReadParallelism = *parallelism
		case "hostname":
			cfg.Hostname = *hostname
		case "prometheus-listen":
			cfg.Telemetry.PrometheusAddress = *promAddr
		case "tls-cert-file":
			tls().CertFile = *certFile
		case "tls-key-file":
			tls().KeyFile = *keyFile
		case "tls-client-ca-file":
			tls().ClientCAFile = *clientCA
		case "allowed-clients":
			cfg.AllowedClients = splitList(*allowedCli)
		case "insecure":
			cfg.Insecure = *insecure
		case "max-recv-msg-size-mib":
			cfg.MaxRecvMsgSizeMiB = *maxRecv
		case "max-send-msg-size-mib":
			cfg.MaxSendMsgSizeMiB = *maxSend
		case "log-level":
			cfg.LogLevel = *logLevel
		case "taskstats":
			cfg.Taskstats.Enabled = *useTaskstats
		case "exit-buffer-size":
			cfg.Taskstats.ExitBufferSize = *exitBuffer
		case "exit-max-age":
			cfg.Taskstats.ExitMaxAge = *exitMaxAge
		case "memory-contexts-data-dirs":
			cfg.MemoryContexts.DataDirectories = splitList(*memDataDirs)
		case "memory-contexts-database-user":
			cfg.MemoryContexts.DatabaseUser = *memUser
		case "memory-contexts-min-interval":
			cfg.MemoryContexts.MinInterval = *memInterval
		case "cgroups-disabled":
			cfg.Cgroups.Disabled = *noCgroups
		case "resource-group-parents":
			cfg.Cgroups.ResourceGroupParents = splitList(*rgParents)
		}
	})
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
