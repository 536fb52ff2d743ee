// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package paging

import (
	"bytes"
	"crypto/sha256"
	"io"
	"testing"
)

// A page token names its request with a MAC keyed by a secret of the
// process that issued it: one made without that key (forged, or by another
// process) does not match.
func TestAPageTokenHoldsOnlyWhereItWasIssued(t *testing.T) {
	const request = "GetGPSessions|1d,|"
	fingerprint := func() []byte {
		h := NewMAC()
		_, _ = io.WriteString(h, request)
		return h.Sum(nil)
	}
	issued := fingerprint()
	if unkeyed := sha256.Sum256([]byte(request)); bytes.Equal(issued, unkeyed[:]) {
		t.Fatal("a fingerprint is an unkeyed hash anyone can make")
	}
	issuedBy := tokenKey
	t.Cleanup(func() { tokenKey = issuedBy })
	tokenKey = [32]byte{1} // another process's
	if bytes.Equal(fingerprint(), issued) {
		t.Fatal("another process's key makes the same fingerprint")
	}
}

// Whatever a token carries, its value comes back as it was, NaN and ±Inf too.
func TestATokenValueRoundTrips(t *testing.T) {
	for _, v := range []Value{{}, Str("a\x00é"), Num(-3), Unsigned(1 << 63), Float(-0.5), {Present: true, I: 1, I2: 2}} {
		if got := TokenOf(v).Value(); got != v {
			t.Errorf("%+v came back %+v", v, got)
		}
	}
}
