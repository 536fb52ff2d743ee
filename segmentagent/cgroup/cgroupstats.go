// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"

	"github.com/gpotel/gpotel/segmentagent/internal/kerneltext"
)

// Numbers from linux/cgroupstats.h and linux/taskstats.h.
const (
	taskstatsFamily          = "TASKSTATS"
	cgroupstatsCmdGet        = 4 // CGROUPSTATS_CMD_GET, after TASKSTATS_CMD_{UNSPEC,GET,NEW} and CGROUPSTATS_CMD_UNSPEC
	cgroupstatsCmdAttrFD     = 1 // CGROUPSTATS_CMD_ATTR_FD: u32 fd of the group's directory
	cgroupstatsTypeStats     = 1 // CGROUPSTATS_TYPE_CGROUP_STATS: struct cgroupstats
	cgroupstatsSize          = 5 * 8
	maxCgroupstatsAttributes = 16
)

// DecodeCgroupStats decodes the attributes of a CGROUPSTATS_CMD_NEW reply
// (the genetlink payload after its header). struct cgroupstats is five
// native-endian u64: nr_sleeping, nr_running, nr_stopped,
// nr_uninterruptible, nr_io_wait. A longer attribute (a later kernel that
// appended fields) is read for its first five; a shorter one is an error.
func DecodeCgroupStats(b []byte) (TaskStates, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return TaskStates{}, kerneltext.ShapeError("cgroupstats: %v", err)
	}
	ad.ByteOrder = binary.NativeEndian
	var (
		s     TaskStates
		found bool
		n     int
	)
	for ad.Next() {
		if n++; n > maxCgroupstatsAttributes {
			return TaskStates{}, kerneltext.ShapeError("cgroupstats: more than %d attributes", maxCgroupstatsAttributes)
		}
		if ad.Type() != cgroupstatsTypeStats {
			continue
		}
		v := ad.Bytes()
		if len(v) < cgroupstatsSize {
			return TaskStates{}, fmt.Errorf("%w: cgroupstats: %d bytes, want %d", ErrTruncated, len(v), cgroupstatsSize)
		}
		u := func(i int) uint64 { return binary.NativeEndian.Uint64(v[i*8:]) }
		s = TaskStates{Sleeping: u(0), Running: u(1), Stopped: u(2), Uninterruptible: u(3), IOWait: u(4), HasIOWait: true}
		found = true
	}
	if err := ad.Err(); err != nil {
		return TaskStates{}, kerneltext.ShapeError("cgroupstats: %v", err)
	}
	if !found {
		return TaskStates{}, kerneltext.ShapeError("cgroupstats: reply has no stats attribute")
	}
	return s, nil
}
