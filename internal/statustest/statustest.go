// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package statustest holds the tests' check of a gRPC call's status.
package statustest

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// AssertCode fails t unless err is a gRPC status of code want whose
// message mentions msgPart.
func AssertCode(t testing.TB, err error, want codes.Code, msgPart string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != want {
		t.Fatalf("want %s, got %v", want, err)
	}
	if !strings.Contains(st.Message(), msgPart) {
		t.Fatalf("message %q does not mention %q", st.Message(), msgPart)
	}
}
