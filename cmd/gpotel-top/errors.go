// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// callErr is a failed call told as a sentence; the gRPC status stays
// reachable (status.Code, errors.As) for code that decides by it.
type callErr struct {
	text string
	err  error
}

func (e callErr) Error() string { return e.text }
func (e callErr) Unwrap() error { return e.err }

// callError says in a sentence why asking for what failed, for a DBA: no
// status struct, no transport jargon.
func (c *sessionClient) callError(what string, err error) error {
	addr := c.opts.Addr
	st := status.Convert(err)
	msg := strings.TrimSuffix(st.Message(), ".")
	var text string
	switch st.Code() {
	case codes.Unavailable:
		text = fmt.Sprintf("cannot reach the collector at %s (%s); trying again", addr, lastCause(msg))
	case codes.DeadlineExceeded:
		text = fmt.Sprintf("the collector at %s did not answer for %s within %s; trying again", addr, what, c.timeout)
	case codes.Unauthenticated:
		text = fmt.Sprintf("the collector at %s refused to show %s: %s (the reading token: --token-file or $%s)", addr, what, msg, tokenEnv)
	case codes.PermissionDenied:
		text = fmt.Sprintf("the collector at %s does not let this client see %s: %s", addr, what, msg)
	case codes.Unimplemented:
		text = fmt.Sprintf("the collector at %s does not serve %s", addr, what)
	case codes.Canceled:
		text = "stopped"
	default:
		text = fmt.Sprintf("the collector at %s could not give %s: %s (%s)", addr, what, msg, st.Code())
	}
	return callErr{text: text, err: err}
}

// lastCause is the innermost reason of a transport message such as
// `connection error: desc = "transport: Error while dialing: dial tcp
// 127.0.0.1:1432: connect: connection refused"`: "connection refused".
func lastCause(msg string) string {
	msg = strings.Trim(msg, `" `)
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	if msg == "" {
		return "no connection"
	}
	return strings.Trim(msg, `"`)
}
