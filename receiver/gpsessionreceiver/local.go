// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"

	"go.opentelemetry.io/collector/receiver"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/segmentagent"
)

// localReader reads the local_hosts in-process, as their agent would: their
// processes, and, once started, the exit records it keeps.
type localReader interface {
	procReader
	exitReader
	// StartExitRecords starts listening for exit records; StopExitRecords stops.
	StartExitRecords() error
	StopExitRecords()
}

// localService is the agent's own service as a localReader.
type localService struct{ *segmentagent.Service }

func (l localService) GetExitRecords(ctx context.Context, req *gpotelv1.GetExitRecordsRequest) (*gpotelv1.GetExitRecordsResponse, error) {
	return l.TaskStats().GetExitRecords(ctx, req)
}

func (l localService) StartExitRecords() error { return l.TaskStats().Start() }

func (l localService) StopExitRecords() { l.TaskStats().Stop() }

// localReaderFactory builds the in-process reader for local_hosts: the
// agent's own service, called without gRPC. It reads procfs exactly as a
// remote agent would, so local and remote hosts produce the same records.
func localReaderFactory(cfg *Config, set receiver.Settings) func() (localReader, error) {
	if len(cfg.LocalHosts) == 0 {
		return nil
	}
	return func() (localReader, error) {
		svc, err := segmentagent.NewService(cfg.Local, set.Logger, set.MeterProvider)
		if err != nil {
			return nil, err
		}
		return localService{svc}, nil
	}
}
