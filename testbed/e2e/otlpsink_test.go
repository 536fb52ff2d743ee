// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// A bounded OTLP file never takes more than twice its bound on disk and
// keeps the newest requests: the demo runs for hours.
func TestOTLPFileStaysWithinItsBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "otlp-metrics.jsonl")
	sink, err := StartOTLPSink("127.0.0.1:0", path, 0)
	if err != nil {
		t.Fatal(err)
	}
	const bound = 4096
	sink.RotateAt(bound)
	const requests = 200
	for i := range requests {
		md := pmetric.NewMetrics()
		md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetName("request." + strconv.Itoa(i))
		if _, err := sink.Export(context.Background(), pmetricotlp.NewExportRequestFromMetrics(md)); err != nil {
			t.Fatal(err)
		}
		total := int64(0)
		for _, p := range []string{path, path + ".1"} {
			if st, err := os.Stat(p); err == nil {
				total += st.Size()
			}
		}
		if total > 2*bound {
			t.Fatalf("after %d requests the files hold %d bytes, over twice the bound %d", i+1, total, bound)
		}
	}
	if err := sink.Stop(); err != nil {
		t.Fatal(err)
	}
	last := lastLine(t, path)
	if !strings.Contains(last, `"request.`+strconv.Itoa(requests-1)+`"`) {
		t.Errorf("the file's last request is %q, want the newest", last)
	}
	if _, err := os.Stat(path + ".1"); err != nil {
		t.Errorf("no rotated file: %v", err)
	}
}

func lastLine(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var last string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		last = sc.Text()
	}
	return last
}
