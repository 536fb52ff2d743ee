// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"testing"
)

func TestLockObjectNamesTheRelationOrTheTransaction(t *testing.T) {
	rel, xid := "public.t", "742"
	if got := lockObject("relation", &rel, nil); got != "public.t" {
		t.Errorf("relation lock: %q", got)
	}
	if got := lockObject("transactionid", nil, &xid); got != "transaction 742" {
		t.Errorf("transaction lock: %q", got)
	}
	if got := lockObject("advisory", nil, nil); got != "advisory" {
		t.Errorf("advisory lock: %q", got)
	}
}
