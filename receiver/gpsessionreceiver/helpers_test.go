package gpsessionreceiver

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
)

func componentTelemetry() component.TelemetrySettings { return componenttest.NewNopTelemetrySettings() }
