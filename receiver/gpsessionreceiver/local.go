package gpsessionreceiver

import (
	"go.opentelemetry.io/collector/receiver"

	"github.com/gpotel/gpotel/segmentagent"
)

// localReaderFactory builds the in-process reader for local_hosts: the
// agent's own service, called without gRPC. It reads procfs exactly as a
// remote agent would, so local and remote hosts produce the same records.
func localReaderFactory(cfg *Config, set receiver.Settings) func() (procReader, error) {
	if len(cfg.LocalHosts) == 0 {
		return nil
	}
	return func() (procReader, error) {
		return segmentagent.NewService(cfg.Local, set.Logger, set.MeterProvider)
	}
}
