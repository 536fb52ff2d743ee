package gpsessionreceiver

import (
	"errors"

	"go.opentelemetry.io/collector/receiver"
)

// localReaderFactory builds the in-process reader for local_hosts.
func localReaderFactory(cfg *Config, set receiver.Settings) func() (procReader, error) {
	if len(cfg.LocalHosts) == 0 {
		return nil
	}
	return func() (procReader, error) {
		return nil, errors.New("the in-process agent service is not available in this build")
	}
}
