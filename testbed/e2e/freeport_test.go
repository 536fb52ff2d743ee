// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// The ports handed to child processes lie outside the kernel's ephemeral
// range, where no bind to port 0 and no outgoing connection can take one
// between freePort's check and the child's bind; none is given twice.
func TestFreePortsAreOutsideTheEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral range to stay out of: %v", err)
	}
	f := strings.Fields(string(b))
	first, _ := strconv.Atoi(f[0])
	last, _ := strconv.Atoi(f[1])
	seen := map[int]bool{}
	for range 200 {
		port, err := freePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if port >= first && port <= last {
			t.Fatalf("port %d is inside the ephemeral range %d-%d", port, first, last)
		}
		if seen[port] {
			t.Fatalf("port %d given twice", port)
		}
		seen[port] = true
	}
}
