// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package listenaddr holds the rule gpotel's servers share: plaintext stays
// on loopback unless the operator says otherwise.
package listenaddr

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Loopback reports whether a server listening on endpoint (host:port) is
// reachable from this host only: "localhost", 127.0.0.0/8 or ::1. An empty
// host, a wildcard or any other name listens beyond the host.
func Loopback(endpoint string) bool {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// CheckPlaintext refuses a listener beyond loopback without TLS unless
// insecure is set; setting names the configuration key for the message.
func CheckPlaintext(setting, endpoint string, hasTLS, insecure bool) error {
	if hasTLS || insecure || Loopback(endpoint) {
		return nil
	}
	return fmt.Errorf("%s %q is not a loopback address and tls is not configured: configure tls, or set insecure: true to serve plaintext beyond this "+
		"host", setting, endpoint)
}

// PlaintextBeyondLoopback is true when a server will answer other hosts without TLS:
// the case that deserves a warning at start.
func PlaintextBeyondLoopback(endpoint string, hasTLS bool) bool {
	return !hasTLS && !Loopback(endpoint)
}
