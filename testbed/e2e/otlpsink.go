// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"sync"

	// Registers the zstd and snappy gRPC codecs the otlp exporter may compress with.
	_ "go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	// Registers gzip, the otlp exporter's default compression.
	_ "google.golang.org/grpc/encoding/gzip"
)

// OTLPSink is a real OTLP/gRPC metrics and logs endpoint: it keeps the
// newest metrics requests in memory for tests and, given a file, appends
// each one as an OTLP/JSON line; it keeps every log record (the
// finished-work events).
type OTLPSink struct {
	pmetricotlp.UnimplementedGRPCServer
	logs logSink

	lis  net.Listener
	srv  *grpc.Server
	keep int

	mu       sync.Mutex
	received []pmetric.Metrics
	requests int
	path     string
	out      *os.File
	w        *bufio.Writer
	written  int64 // bytes in the file now
	// maxFileBytes > 0 bounds the file: see RotateAt.
	maxFileBytes int64
	json         pmetric.JSONMarshaler
	writeErr     error
}

// StartOTLPSink listens on addr (host:port, port 0 picks one), keeping at most
// keep requests in memory; jsonlPath may be empty.
func StartOTLPSink(addr, jsonlPath string, keep int) (*OTLPSink, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("otlp sink: %w", err)
	}
	s := &OTLPSink{lis: lis, srv: grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20)), keep: keep}
	if jsonlPath != "" {
		f, err := os.OpenFile(jsonlPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			_ = lis.Close()
			return nil, fmt.Errorf("otlp sink: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			_ = f.Close()
			_ = lis.Close()
			return nil, fmt.Errorf("otlp sink: %w", err)
		}
		s.path, s.out, s.w, s.written = jsonlPath, f, bufio.NewWriter(f), st.Size()
	}
	pmetricotlp.RegisterGRPCServer(s.srv, s)
	plogotlp.RegisterGRPCServer(s.srv, &s.logs)
	go func() { _ = s.srv.Serve(lis) }()
	return s, nil
}

// Addr is the sink's host:port.
func (s *OTLPSink) Addr() string { return s.lis.Addr().String() }

// Export keeps one request.
func (s *OTLPSink) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	md := pmetric.NewMetrics()
	req.Metrics().CopyTo(md)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if s.keep > 0 {
		if len(s.received) == s.keep {
			s.received = append(s.received[:0], s.received[1:]...)
		}
		s.received = append(s.received, md)
	}
	if s.w != nil && s.writeErr == nil {
		b, err := s.json.MarshalMetrics(md)
		b = append(b, '\n')
		if err == nil && s.maxFileBytes > 0 && s.written > 0 && s.written+int64(len(b)) > s.maxFileBytes {
			err = s.rotate()
		}
		if err == nil {
			_, err = s.w.Write(b)
		}
		if err == nil {
			err = s.w.Flush()
		}
		s.written += int64(len(b))
		s.writeErr = err
	}
	return pmetricotlp.NewExportResponse(), nil
}

// RotateAt bounds the file: a request that would take it past maxBytes
// moves it to <file>.1 (replacing the one there) and starts it again, so
// the two hold the newest requests and at most 2 × maxBytes on disk (a
// single request larger than maxBytes still gets a file of its own).
// 0 lets the file grow.
func (s *OTLPSink) RotateAt(maxBytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxFileBytes = maxBytes
}

// rotate moves the file to <file>.1 and opens it again, empty.
func (s *OTLPSink) rotate() error {
	if err := s.out.Close(); err != nil {
		return err
	}
	if err := os.Rename(s.path, s.path+".1"); err != nil {
		return err
	}
	f, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		s.out, s.w = nil, nil
		return err
	}
	s.out, s.w, s.written = f, bufio.NewWriter(f), 0
	return nil
}

// Received returns the kept requests, oldest first.
func (s *OTLPSink) Received() []pmetric.Metrics {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pmetric.Metrics(nil), s.received...)
}

// Requests counts every request ever received.
func (s *OTLPSink) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Stop ends the server and closes the file; it reports a failed write.
func (s *OTLPSink) Stop() error {
	s.srv.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out != nil {
		if err := s.out.Close(); err != nil && s.writeErr == nil {
			s.writeErr = err
		}
		s.out, s.w = nil, nil
	}
	return s.writeErr
}

// logSink is the sink's logs service.
type logSink struct {
	plogotlp.UnimplementedGRPCServer
	mu      sync.Mutex
	records []plog.LogRecord
}

// Export keeps every log record of one request.
func (l *logSink) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rls := req.Logs().ResourceLogs()
	for i := range rls.Len() {
		sls := rls.At(i).ScopeLogs()
		for j := range sls.Len() {
			lrs := sls.At(j).LogRecords()
			for k := range lrs.Len() {
				lr := plog.NewLogRecord()
				lrs.At(k).CopyTo(lr)
				l.records = append(l.records, lr)
			}
		}
	}
	return plogotlp.NewExportResponse(), nil
}

// LogRecords returns every log record received, oldest first.
func (s *OTLPSink) LogRecords() []plog.LogRecord {
	s.logs.mu.Lock()
	defer s.logs.mu.Unlock()
	return append([]plog.LogRecord(nil), s.logs.records...)
}
