// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package objectname bounds the names of a server's objects (roles,
// resource queues and groups) that gpotel takes in, from a catalog row or
// from its own configuration: no longer than a server's names, valid
// UTF-8, and nothing that steers a terminal the name is shown on.
package objectname

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxBytes is NAMEDATALEN-1: the server cuts every name to this.
const MaxBytes = 63

// Valid tells a name of 1 to MaxBytes bytes of UTF-8 without a control
// character (C0, DEL or C1). A quoted identifier may hold control
// characters, but gpotel shows names on terminals and in logs: such a name
// is not taken, as one no server could hold is not.
func Valid(name string) bool {
	return name != "" && len(name) <= MaxBytes && utf8.ValidString(name) && !strings.ContainsFunc(name, unicode.IsControl)
}
