// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
)

// Defaults of ServiceConfig.
const (
	DefaultProcRoot          = "/proc"
	DefaultSysRoot           = "/sys"
	DefaultMaxPidsPerRequest = 10000
	DefaultDeltaClients      = 64
	// MaxDeltaClients bounds delta_clients: each client may cost the agent
	// 16 B per process of max_pids_per_request.
	MaxDeltaClients = 4096
)

// DefaultAllowedUsers are the conventional owners of PostgreSQL (Debian, RHEL
// packages) and of Greenplum and Cloudberry clusters. They are used only when
// neither allowed_users nor postmaster_pid_files is set, and the ones that do
// not exist on the host are skipped.
var DefaultAllowedUsers = []string{"postgres", "gpadmin"}

// ServiceConfig configures the GetPidProcStat service. Its zero value reads
// /proc for the default users; NewService fills every zero field with its default.
type ServiceConfig struct {
	// ProcRoot is where procfs is mounted (a fixture tree in tests).
	ProcRoot string `mapstructure:"proc_root"`
	// SysRoot is where sysfs is mounted: the host's online CPUs
	// (devices/system/cpu/online) come from there.
	SysRoot string `mapstructure:"sys_root"`
	// AllowedUsers are the user names or numeric uids whose processes may be
	// read, matched against a process's real uid. Every entry must resolve.
	AllowedUsers []string `mapstructure:"allowed_users"`
	// PostmasterPidFiles allows the owner of each file, e.g.
	// /data/primary/gpseg0/postmaster.pid: the user that runs that instance.
	PostmasterPidFiles []string `mapstructure:"postmaster_pid_files"`
	// MaxPidsPerRequest bounds one request; more is InvalidArgument.
	MaxPidsPerRequest int `mapstructure:"max_pids_per_request"`
	// ReadParallelism is how many goroutines read one request (0: GOMAXPROCS).
	ReadParallelism int `mapstructure:"read_parallelism"`
	// Hostname overrides os.Hostname in answers.
	Hostname string `mapstructure:"hostname"`
	// Taskstats adds the kernel's taskstats records to answers and keeps the
	// final records of exited database processes (needs CAP_NET_ADMIN).
	Taskstats TaskstatsConfig `mapstructure:"taskstats"`
	// Cgroups configures host pressure, the processes' control groups and
	// their pressure and task states in answers.
	Cgroups CgroupsConfig `mapstructure:"cgroups"`
	// DeltaClients is how many clients (collector runs × batches) the agent
	// keeps its last answer for, to leave out what did not change since
	// (docs/pipeline.md); past it, the least recently served is forgotten.
	DeltaClients int `mapstructure:"delta_clients"`
}

// CgroupsConfig configures what the agent reads about control groups.
type CgroupsConfig struct {
	// Disabled leaves host pressure, groups and task states out of answers.
	Disabled bool `mapstructure:"disabled"`
	// ResourceGroupParents name the directories Greenplum resource groups
	// live under (<parent>/<oid>); empty means gpdb and gpdb.service.
	ResourceGroupParents []string `mapstructure:"resource_group_parents"`
}

// NewDefaultServiceConfig returns the configuration used when nothing is set.
func NewDefaultServiceConfig() ServiceConfig {
	return ServiceConfig{ProcRoot: DefaultProcRoot, SysRoot: DefaultSysRoot, MaxPidsPerRequest: DefaultMaxPidsPerRequest,
		Taskstats: newDefaultTaskstatsConfig()}
}

// Validate reports every problem of the configuration at once.
func (c ServiceConfig) Validate() error {
	var errs []error
	if c.MaxPidsPerRequest < 0 {
		errs = append(errs, fmt.Errorf("max_pids_per_request %d is negative", c.MaxPidsPerRequest))
	}
	if c.DeltaClients < 0 || c.DeltaClients > MaxDeltaClients {
		errs = append(errs, fmt.Errorf("delta_clients %d is not within 0..%d", c.DeltaClients, MaxDeltaClients))
	}
	if c.ReadParallelism < 0 {
		errs = append(errs, fmt.Errorf("read_parallelism %d is negative", c.ReadParallelism))
	}
	for i, u := range c.AllowedUsers {
		if strings.TrimSpace(u) == "" {
			errs = append(errs, fmt.Errorf("allowed_users[%d] is empty", i))
		}
	}
	for i, f := range c.PostmasterPidFiles {
		if f == "" {
			errs = append(errs, fmt.Errorf("postmaster_pid_files[%d] is empty", i))
		}
	}
	if c.Taskstats.ExitBufferSize < 0 {
		errs = append(errs, fmt.Errorf("taskstats.exit_buffer_size %d is negative", c.Taskstats.ExitBufferSize))
	}
	if c.Taskstats.ExitMaxAge < 0 {
		errs = append(errs, fmt.Errorf("taskstats.exit_max_age %s is negative", c.Taskstats.ExitMaxAge))
	}
	if c.Taskstats.ListenerReadBufferKiB < 0 {
		errs = append(errs, fmt.Errorf("taskstats.listener_read_buffer_kib %d is negative", c.Taskstats.ListenerReadBufferKiB))
	}
	for i, p := range c.Cgroups.ResourceGroupParents {
		if p == "" || strings.ContainsRune(p, '/') {
			errs = append(errs, fmt.Errorf("cgroups.resource_group_parents[%d] %q is not a directory name", i, p))
		}
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero fields.
func (c ServiceConfig) withDefaults() ServiceConfig {
	if c.ProcRoot == "" {
		c.ProcRoot = DefaultProcRoot
	}
	if c.SysRoot == "" {
		c.SysRoot = DefaultSysRoot
	}
	if c.MaxPidsPerRequest == 0 {
		c.MaxPidsPerRequest = DefaultMaxPidsPerRequest
	}
	if c.DeltaClients == 0 {
		c.DeltaClients = DefaultDeltaClients
	}
	if c.ReadParallelism == 0 {
		c.ReadParallelism = runtime.GOMAXPROCS(0)
	}
	if c.Taskstats.ExitBufferSize == 0 {
		c.Taskstats.ExitBufferSize = DefaultExitBufferSize
	}
	if c.Taskstats.ExitMaxAge == 0 {
		c.Taskstats.ExitMaxAge = DefaultExitMaxAge
	}
	if c.Taskstats.ListenerReadBufferKiB == 0 {
		c.Taskstats.ListenerReadBufferKiB = DefaultListenerReadBufferKiB
	}
	return c
}
