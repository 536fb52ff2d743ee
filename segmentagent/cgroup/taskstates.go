// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

// TaskStates counts a group's tasks by scheduler state, in the buckets the
// kernel's struct cgroupstats uses.
type TaskStates struct {
	Running         uint64
	Sleeping        uint64
	Uninterruptible uint64
	Stopped         uint64
	// IOWait: tasks in none of the states above that wait for I/O. Only
	// cgroupstats knows it (HasIOWait); /proc/<pid>/stat cannot tell.
	IOWait    uint64
	HasIOWait bool
	// Other: counted from stat in a state no bucket above takes (zombie, idle, dead).
	Other uint64
}

// AddState counts one task by the state letter of /proc/<pid>/stat.
func (s *TaskStates) AddState(state byte) {
	switch state {
	case 'R':
		s.Running++
	case 'S':
		s.Sleeping++
	case 'D':
		s.Uninterruptible++
	case 'T', 't':
		s.Stopped++
	default:
		s.Other++
	}
}
