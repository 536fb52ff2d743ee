// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpinfo

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/paging"
	"github.com/gpotel/gpotel/internal/pipeline"
)

// pageToken marks the last session a page returned, by its place in the
// order: the next page starts right after it, whatever else changed.
type pageToken struct {
	Request string              `json:"r"`
	Values  []paging.TokenValue `json:"v,omitempty"`
	TmID    int64               `json:"t"`
	SessID  int64               `json:"s"`
}

func encodeToken(request string, e orderEntry) string {
	t := pageToken{Request: request, TmID: e.s.Key.TmID, SessID: e.s.Key.ID}
	for _, v := range e.vals {
		t.Values = append(t.Values, paging.TokenOf(v))
	}
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

// tokenBound is an upper bound of encodeToken's length, cheap to compute.
func tokenBound(request string, e orderEntry) int {
	n := 64 + len(request)
	for _, v := range e.vals {
		n += 100 + 6*len(v.S) // JSON escapes a byte to at most \u00XX
	}
	return (n*4+2)/3 + 4
}

func decodeToken(tok, request string, spec sortSpec) ([]paging.Value, pipeline.SessionKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, pipeline.SessionKey{}, paging.ErrBadToken
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
		return nil, pipeline.SessionKey{}, paging.ErrBadToken
	}
	errOther := errors.New("page_token was issued for a different request " +
		"(method, sort fields, filters, show_system or hide_empty_queries changed) or by another run of the collector")
	if t.Request != request {
		return nil, pipeline.SessionKey{}, errOther
	}
	vals := make([]paging.Value, 0, len(spec))
	if len(t.Values) > 0 {
		dec := json.NewDecoder(bytes.NewReader(t.Values))
		if tk, err := dec.Token(); err != nil || tk != json.Delim('[') {
			return nil, pipeline.SessionKey{}, paging.ErrBadToken
		}
		for dec.More() {
			if len(vals) == len(spec) {
				return nil, pipeline.SessionKey{}, errOther
			}
			var v paging.TokenValue
			if err := dec.Decode(&v); err != nil {
				return nil, pipeline.SessionKey{}, paging.ErrBadToken
			}
			vals = append(vals, v.Value())
		}
	}
	if len(vals) != len(spec) {
		return nil, pipeline.SessionKey{}, errOther
	}
	return vals, pipeline.SessionKey{TmID: t.TmID, ID: t.SessID}, nil
}

// requestFingerprint names what a page token is valid for.
func requestFingerprint(method string, spec sortSpec, filter *sessionFilter) string {
	h := paging.NewMAC()
	_, _ = fmt.Fprintf(h, "%s|%s|", method, spec)
	filter.writeCanonical(h)
	return hex.EncodeToString(h.Sum(nil)[:12])
}
