module github.com/gpotel/gpotel

go 1.26.0

require (
	github.com/charmbracelet/bubbletea v1.3.10
	github.com/charmbracelet/lipgloss v1.1.0
	github.com/charmbracelet/x/ansi v0.10.1
	github.com/google/go-cmp v0.7.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/mdlayher/genetlink v1.4.0
	github.com/mdlayher/netlink v1.9.0
	github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage v0.155.0
	github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest v0.155.0
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/procfs v0.23.0
	github.com/shirou/gopsutil/v4 v4.26.10
	github.com/stretchr/testify v1.12.1
	go.opentelemetry.io/collector/component v1.61.0
	go.opentelemetry.io/collector/component/componentstatus v0.155.0
	go.opentelemetry.io/collector/component/componenttest v0.155.0
	go.opentelemetry.io/collector/config/configauth v1.61.0
	go.opentelemetry.io/collector/config/configgrpc v0.155.0
	go.opentelemetry.io/collector/config/configopaque v1.61.0
	go.opentelemetry.io/collector/config/configoptional v1.61.0
	go.opentelemetry.io/collector/config/configtls v1.61.0
	go.opentelemetry.io/collector/confmap v1.61.0
	go.opentelemetry.io/collector/confmap/xconfmap v0.155.0
	go.opentelemetry.io/collector/connector v0.155.0
	go.opentelemetry.io/collector/connector/connectortest v0.155.0
	go.opentelemetry.io/collector/consumer v1.61.0
	go.opentelemetry.io/collector/consumer/consumertest v0.155.0
	go.opentelemetry.io/collector/exporter v1.61.0
	go.opentelemetry.io/collector/exporter/exporterhelper v0.155.0
	go.opentelemetry.io/collector/exporter/exportertest v0.155.0
	go.opentelemetry.io/collector/extension/extensionauth v1.61.0
	go.opentelemetry.io/collector/extension/extensiontest v0.155.0
	go.opentelemetry.io/collector/filter v0.155.0
	go.opentelemetry.io/collector/pdata v1.61.0
	go.opentelemetry.io/collector/processor v1.61.0
	go.opentelemetry.io/collector/processor/processorhelper v0.155.0
	go.opentelemetry.io/collector/processor/processortest v0.155.0
	go.opentelemetry.io/collector/receiver v1.61.0
	go.opentelemetry.io/collector/receiver/receivertest v0.155.0
	go.opentelemetry.io/collector/scraper v0.155.0
	go.opentelemetry.io/collector/scraper/scraperhelper v0.155.0
	go.opentelemetry.io/otel v1.44.0
	go.opentelemetry.io/otel/exporters/prometheus v0.66.0
	go.opentelemetry.io/otel/metric v1.44.0
	go.opentelemetry.io/otel/sdk v1.44.0
	go.opentelemetry.io/otel/sdk/metric v1.44.0
	go.opentelemetry.io/otel/trace v1.44.0
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
	go.yaml.in/yaml/v3 v3.0.5
	golang.org/x/net v0.60.0
	golang.org/x/sync v0.24.0
	golang.org/x/sys v0.49.0
	golang.org/x/text v0.42.0
	google.golang.org/grpc v1.81.1
	google.golang.org/protobuf v1.36.12
	gopkg.in/yaml.v3 v3.0.1
)

require golang.org/x/time v0.16.0

require go.etcd.io/bbolt v1.5.0 // indirect

require (
	go.opentelemetry.io/collector/connector/xconnector v0.155.0 // indirect
	go.opentelemetry.io/collector/internal/fanoutconsumer v0.155.0 // indirect
)

require (
	github.com/Microsoft/go-winio v0.6.2 // indirect
	github.com/aymanbagabas/go-osc52/v2 v2.0.1 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v6 v6.0.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/charmbracelet/colorprofile v0.2.3-0.20250311203215-f60798e515dc // indirect
	github.com/charmbracelet/x/cellbuf v0.0.13-0.20250311204145-2c3ea96c31dd // indirect
	github.com/charmbracelet/x/term v0.2.1 // indirect
	github.com/ebitengine/purego v0.11.2 // indirect
	github.com/erikgeiser/coninput v0.0.0-20211004153227-1c3628e74d0f // indirect
	github.com/foxboron/go-tpm-keyfiles v0.0.0-20251226215517-609e4778396f // indirect
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/go-ole/go-ole v1.2.6 // indirect
	github.com/go-viper/mapstructure/v2 v2.5.0 // indirect
	github.com/gobwas/glob v0.2.3 // indirect
	github.com/golang/snappy v1.0.0 // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/go-version v1.9.0 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/klauspost/compress v1.20.1 // indirect
	github.com/knadh/koanf/maps v0.1.2 // indirect
	github.com/knadh/koanf/providers/confmap v1.0.0 // indirect
	github.com/knadh/koanf/v2 v2.3.5 // indirect
	github.com/lucasb-eyer/go-colorful v1.2.0 // indirect
	github.com/lufia/plan9stats v0.0.0-20211012122336-39d0f177ccd0 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/mattn/go-localereader v0.0.1 // indirect
	github.com/mattn/go-runewidth v0.0.16 // indirect
	github.com/mdlayher/socket v0.6.0 // indirect
	github.com/mitchellh/copystructure v1.2.0 // indirect
	github.com/mitchellh/reflectwalk v1.0.2 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.3-0.20250322232337-35a7c28c31ee // indirect
	github.com/muesli/ansi v0.0.0-20230316100256-276c6243b2f6 // indirect
	github.com/muesli/cancelreader v0.2.2 // indirect
	github.com/muesli/termenv v0.16.0
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatautil v0.155.0 // indirect
	github.com/planetscale/vtprotobuf v0.6.1-0.20240319094008-0393e58bdf10
	github.com/power-devops/perfstat v0.0.0-20260805114148-88456608a4f6 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/otlptranslator v1.0.0 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/tklauser/go-sysconf v0.4.0 // indirect
	github.com/tklauser/numcpus v0.12.0 // indirect
	github.com/xo/terminfo v0.0.0-20220910002029-abceb7e1c41e // indirect
	github.com/yusufpapurcu/wmi v1.2.4 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/collector v0.155.0 // indirect
	go.opentelemetry.io/collector/client v1.61.0 // indirect
	go.opentelemetry.io/collector/config/configcompression v1.61.0 // indirect
	go.opentelemetry.io/collector/config/configmiddleware v1.61.0 // indirect
	go.opentelemetry.io/collector/config/confignet v1.61.0 // indirect
	go.opentelemetry.io/collector/config/configretry v1.61.0 // indirect
	go.opentelemetry.io/collector/consumer/consumererror v0.155.0
	go.opentelemetry.io/collector/consumer/xconsumer v0.155.0 // indirect
	go.opentelemetry.io/collector/exporter/xexporter v0.155.0 // indirect
	go.opentelemetry.io/collector/extension v1.61.0
	go.opentelemetry.io/collector/extension/extensionmiddleware v0.155.0 // indirect
	go.opentelemetry.io/collector/extension/xextension v0.155.0
	go.opentelemetry.io/collector/featuregate v1.61.0 // indirect
	go.opentelemetry.io/collector/internal/componentalias v0.155.0 // indirect
	go.opentelemetry.io/collector/pdata/pprofile v0.155.0 // indirect
	go.opentelemetry.io/collector/pdata/testdata v0.155.0 // indirect
	go.opentelemetry.io/collector/pdata/xpdata v0.155.0 // indirect
	go.opentelemetry.io/collector/pipeline v1.61.0
	go.opentelemetry.io/collector/pipeline/xpipeline v0.155.0 // indirect
	go.opentelemetry.io/collector/processor/xprocessor v0.155.0 // indirect
	go.opentelemetry.io/collector/receiver/receiverhelper v0.155.0 // indirect
	go.opentelemetry.io/collector/receiver/xreceiver v0.155.0 // indirect
	go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc v0.69.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
)

// pmetrictest's own tests import golden v0.155.0, which `go mod tidy`
// resolves; the Go module proxy refuses that version (403), and nothing of
// it is linked into any gpotel binary.
replace github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden => github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden v0.154.0
