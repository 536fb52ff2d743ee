// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

// clientBackendTypes are the backend_type values of processes that work for a client session.
var clientBackendTypes = map[string]bool{"client backend": true, "parallel worker": true}

// isSystemProcess marks a process that does not work for a client session.
func isSystemProcess(sessionID int64, backendType string) bool {
	if sessionID <= 0 {
		return true
	}
	return backendType != "" && !clientBackendTypes[backendType]
}
