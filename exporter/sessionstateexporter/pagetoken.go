// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math"

	"github.com/gpotel/gpotel/internal/pipeline"
)

// pageToken marks the last session a page returned, by its place in the
// order: the next page starts right after it, whatever else changed.
type pageToken struct {
	Request string       `json:"r"`
	Values  []tokenValue `json:"v,omitempty"`
	TmID    int64        `json:"t"`
	SessID  int64        `json:"s"`
}

// tokenValue is a sortValue in JSON; floats travel as bits (NaN, ±Inf).
type tokenValue struct {
	Present bool   `json:"p,omitempty"`
	S       string `json:"s,omitempty"`
	I       int64  `json:"i,omitempty"`
	I2      int64  `json:"j,omitempty"`
	U       uint64 `json:"u,omitempty"`
	F       uint64 `json:"f,omitempty"`
}

var errBadToken = errors.New("page_token is not one this server issued")

func encodeToken(request string, e orderEntry) string {
	t := pageToken{Request: request, TmID: e.s.key.TmID, SessID: e.s.key.ID}
	for _, v := range e.vals {
		t.Values = append(t.Values, tokenValue{Present: v.present, S: v.s, I: v.i, I2: v.i2, U: v.u, F: math.Float64bits(v.f)})
	}
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

// tokenBound is an upper bound of encodeToken's length, cheap to compute.
func tokenBound(request string, e orderEntry) int {
	n := 64 + len(request)
	for _, v := range e.vals {
		n += 100 + 6*len(v.s) // JSON escapes a byte to at most \u00XX
	}
	return (n*4+2)/3 + 4
}

func decodeToken(tok, request string, spec sortSpec) ([]sortValue, pipeline.SessionKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, pipeline.SessionKey{}, errBadToken
	}
	// The values are decoded one by one, so that a forged token of many small
	// values is refused before it is held.
	var t struct {
		Request string          `json:"r"`
		Values  json.RawMessage `json:"v"`
		TmID    int64           `json:"t"`
		SessID  int64           `json:"s"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, pipeline.SessionKey{}, errBadToken
	}
	errOther := errors.New("page_token was issued for a different request (method, sort fields, filters, show_system or hide_empty_queries changed) or by another run of the collector")
	if t.Request != request {
		return nil, pipeline.SessionKey{}, errOther
	}
	vals := make([]sortValue, 0, len(spec))
	if len(t.Values) > 0 {
		dec := json.NewDecoder(bytes.NewReader(t.Values))
		if tk, err := dec.Token(); err != nil || tk != json.Delim('[') {
			return nil, pipeline.SessionKey{}, errBadToken
		}
		for dec.More() {
			if len(vals) == len(spec) {
				return nil, pipeline.SessionKey{}, errOther
			}
			var v tokenValue
			if err := dec.Decode(&v); err != nil {
				return nil, pipeline.SessionKey{}, errBadToken
			}
			vals = append(vals, sortValue{present: v.Present, s: v.S, i: v.I, i2: v.I2, u: v.U, f: math.Float64frombits(v.F)})
		}
	}
	if len(vals) != len(spec) {
		return nil, pipeline.SessionKey{}, errOther
	}
	return vals, pipeline.SessionKey{TmID: t.TmID, ID: t.SessID}, nil
}

// tokenKey keys the request fingerprints of page tokens: a token names its
// request with a MAC only this process can make, so none is forged or
// carried over from another run.
var tokenKey = func() (k [32]byte) {
	_, _ = rand.Read(k[:]) // never fails (crypto/rand)
	return k
}()

// newTokenMAC is the hash of a request's fingerprint.
func newTokenMAC() hash.Hash { return hmac.New(sha256.New, tokenKey[:]) }

// requestFingerprint names what a page token is valid for.
func requestFingerprint(method string, spec sortSpec, filter *sessionFilter) string {
	h := newTokenMAC()
	_, _ = fmt.Fprintf(h, "%s|%s|", method, spec)
	filter.writeCanonical(h)
	return hex.EncodeToString(h.Sum(nil)[:12])
}
