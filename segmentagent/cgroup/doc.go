// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package cgroup reads what the kernel knows about the control groups the
// database processes run in, and the host's pressure stall information:
//
//   - the cgroup mounts, from /proc/self/mountinfo (v1 hierarchies and the
//     v2 unified one; never a fixed path);
//   - a process's groups, from /proc/<pid>/cgroup;
//   - pressure (some/full, avg10/avg60/avg300, total) from /proc/pressure/*
//     for the host and from <resource>.pressure for cgroup v2 groups;
//   - task states per group: the taskstats CGROUPSTATS_CMD_GET command for
//     cgroup v1 groups (it answers only for v1 directories), counted from the
//     processes' stat states for v2 groups.
//
// Greenplum resource groups are groups named by their oid under a parent
// directory: gpdb/<oid> in each cgroup v1 controller (Greenplum 6), and
// <gp_resource_group_cgroup_parent>/<oid> on cgroup v2 (Greenplum 7 and
// Cloudberry; that setting defaults to gpdb.service).
//
// Parsers take bytes and return structs; kernel units (microseconds of
// stall) stay as the kernel prints them.
//
// CGROUPSTATS_CMD_GET is a command of the TASKSTATS generic netlink family;
// it is sent through github.com/mdlayher/genetlink (the module proxy here
// does not serve github.com/mdlayher/taskstats, whose CGroupStats wraps the
// same command) and its one reply attribute is decoded by DecodeCgroupStats.
package cgroup
