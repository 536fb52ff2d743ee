// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package objectname tells a name a Greenplum or PostgreSQL server could
// hold for one of its objects (a role, a resource queue or group) from one
// it could not: what gpotel accepts such a name as, whether from a catalog
// row or from its own configuration.
package objectname

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxBytes is NAMEDATALEN-1: the server cuts every name to this.
const MaxBytes = 63

// Valid tells a name of 1 to MaxBytes bytes of UTF-8 without a control
// character (C0, DEL or C1: each can steer a terminal the name is shown on).
func Valid(name string) bool {
	return name != "" && len(name) <= MaxBytes && utf8.ValidString(name) && !strings.ContainsFunc(name, unicode.IsControl)
}
