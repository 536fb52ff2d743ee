// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package paging

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"hash"
	"math"
)

// ErrBadToken answers a page token that does not decode.
var ErrBadToken = errors.New("page_token is not one this server issued")

const (
	// MaxFilterValues bounds a request's filter values, all fields together.
	MaxFilterValues = 1024
	// TokenFieldOverhead is the room kept in every list response for
	// next_page_token's tag and length.
	TokenFieldOverhead = 1 + 5
)

// TokenValue is a Value in JSON; floats travel as bits (NaN, ±Inf).
type TokenValue struct {
	Present bool   `json:"p,omitempty"`
	S       string `json:"s,omitempty"`
	I       int64  `json:"i,omitempty"`
	I2      int64  `json:"j,omitempty"`
	U       uint64 `json:"u,omitempty"`
	F       uint64 `json:"f,omitempty"`
}

// TokenOf is v as a token carries it.
func TokenOf(v Value) TokenValue {
	return TokenValue{Present: v.Present, S: v.S, I: v.I, I2: v.I2, U: v.U, F: math.Float64bits(v.F)}
}

// Value is the sort value t carries.
func (t TokenValue) Value() Value {
	return Value{Present: t.Present, S: t.S, I: t.I, I2: t.I2, U: t.U, F: math.Float64frombits(t.F)}
}

// tokenKey keys the request fingerprints of page tokens: a token names its
// request with a MAC only this process can make, so none is forged or
// carried over from another run.
var tokenKey = func() (k [32]byte) {
	_, _ = rand.Read(k[:]) // never fails (crypto/rand)
	return k
}()

// NewMAC is the hash of a request's fingerprint.
func NewMAC() hash.Hash { return hmac.New(sha256.New, tokenKey[:]) }

// ItemLen is what an item of n encoded bytes takes in a list response:
// its tag, its length and itself.
func ItemLen(n int) int {
	v := uint64(n) // #nosec G115 -- a size
	l := 1
	for v >= 0x80 {
		v >>= 7
		l++
	}
	return 1 + l + n
}
