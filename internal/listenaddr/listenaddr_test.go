// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package listenaddr

import "testing"

func TestLoopbackOnlyForAddressesOfThisHost(t *testing.T) {
	for endpoint, want := range map[string]bool{
		"127.0.0.1:1433":    true,
		"127.0.0.12:1433":   true,
		"[::1]:1432":        true,
		"localhost:1432":    true,
		"LOCALHOST:1432":    true,
		"0.0.0.0:1433":      false,
		":1433":             false,
		"[::]:1433":         false,
		"10.0.0.5:1433":     false,
		"sdw1:1433":         false,
		"127.0.0.1":         false, // no port: not an endpoint at all
		"localhost.evil:80": false,
	} {
		if got := Loopback(endpoint); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", endpoint, got, want)
		}
	}
}

func TestPlaintextBeyondLoopbackNeedsInsecure(t *testing.T) {
	if err := CheckPlaintext("listen_address", "0.0.0.0:1433", false, false); err == nil {
		t.Error("plaintext on every interface was accepted without insecure")
	}
	for _, c := range []struct {
		endpoint      string
		tls, insecure bool
	}{
		{"0.0.0.0:1433", true, false},
		{"0.0.0.0:1433", false, true},
		{"127.0.0.1:1433", false, false},
	} {
		if err := CheckPlaintext("listen_address", c.endpoint, c.tls, c.insecure); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
