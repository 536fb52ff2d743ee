# Every task a person or CI runs. `make test` is what .ci/run calls.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
BUILD := $(CURDIR)/build
export PATH := $(BIN):/usr/local/go/bin:$(PATH)

# Pinned tool versions.
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.1
PROTOC_GEN_GO_VTPROTO_VERSION := v0.6.1-0.20240319094008-0393e58bdf10
OCB_VERSION := v0.155.0
MDATAGEN_VERSION := v0.155.0
# v2.46 and later need go.digitalxero.dev/rpm, which the Go module proxy does not serve.
NFPM_VERSION := v2.45.0
GOLANGCI_LINT_VERSION := v2.15.0
# The log store the finished-work events are shown arriving in (testbed/e2e).
VICTORIALOGS_VERSION := v1.52.1
# The version is in the file name, so changing the pin installs the new one.
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
# The same; bin/victoria-logs links to the pinned one, where the tests look.
VICTORIALOGS := $(BIN)/victoria-logs-$(VICTORIALOGS_VERSION)

TEST_TIMEOUT ?= 15m
# One package's bound: testbed/e2e alone runs about 12 minutes of drills and truth tests.
DB_TEST_TIMEOUT ?= 40m

.PHONY: all build agent collector victoria-logs test test-stress mutate unit bench bench-scale bench-scale-1m fuzz fuzz-short proto proto-check generate generate-check lint fmt vet tidy-check no-binaries spdx tools demo-deps testbed-deps run clean package

all: build

# Everything `make run` starts: the collector, the agent, gpotel-top and the testbed launcher.
build: agent collector
	$(GO) build -o $(BUILD)/gpotel-top ./cmd/gpotel-top
	$(GO) build -o $(BUILD)/gpotel-testbed ./cmd/gpotel-testbed

agent:
	$(GO) build -o $(BUILD)/gpotel-agent ./cmd/gpotel-agent

# The ocb-built collector: build/otelcol-gpotel from builder-config.yaml (sources in build/).
# ocb runs when the manifest is newer than its output (or the output is missing);
# otherwise its generated module is relinked against the current component sources.
collector: $(BIN)/builder
	@if [ ! -f $(BUILD)/components.go ] || [ builder-config.yaml -nt $(BUILD)/components.go ] || \
		! (cd $(BUILD) && $(GO) build -trimpath -ldflags "-s -w" -o otelcol-gpotel .); then \
		$(BIN)/builder --config builder-config.yaml; \
	fi

$(BIN)/builder:
	GOBIN=$(BIN) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)

# Built from a throwaway module: `go install mdatagen@version` fails where the
# module proxy has no version list for it ("loading deprecation ... 404").
$(BIN)/mdatagen:
	@tmp=$$(mktemp -d) && printf 'module mdatagen-build\n\ngo 1.26.0\n\nrequire go.opentelemetry.io/collector/cmd/mdatagen $(MDATAGEN_VERSION)\n' > $$tmp/go.mod && \
	(cd $$tmp && GOFLAGS=-mod=mod $(GO) build -o $(BIN)/mdatagen go.opentelemetry.io/collector/cmd/mdatagen); rc=$$?; rm -rf $$tmp; exit $$rc

$(BIN)/nfpm:
	GOBIN=$(BIN) $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)

$(GOLANGCI_LINT):
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(BIN)/golangci-lint $@

# Not in Debian: built from the Go module proxy (about a minute).
victoria-logs: $(VICTORIALOGS)
$(VICTORIALOGS):
	@tmp=$$(mktemp -d) && GOBIN=$$tmp $(GO) install github.com/VictoriaMetrics/VictoriaLogs/app/victoria-logs@$(VICTORIALOGS_VERSION) && \
	mv $$tmp/victoria-logs $@; rc=$$?; rm -rf $$tmp; [ $$rc -eq 0 ] && ln -sfn $(notdir $@) $(BIN)/victoria-logs

$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

$(BIN)/protoc-gen-go-vtproto:
	GOBIN=$(BIN) $(GO) install github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@$(PROTOC_GEN_GO_VTPROTO_VERSION)

tools: $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/protoc-gen-go-vtproto $(BIN)/mdatagen $(BIN)/nfpm

# protoc comes from Debian's protobuf-compiler (installed by .ci/run).
# yagpcc/ is the wire-compatible protocol; gpotel/v1/ is gpotel's extension API
# (one .proto per capability, each its own service on the same gRPC servers).
PROTO_FILES := $(wildcard proto/yagpcc/*.proto proto/gpotel/v1/*.proto)
# The agents' answers (GetPidProcStat, exit records) are decoded by
# vtprotobuf's generated code instead of reflection, on the same wire
# format: *_vtproto.pb.go for their protos (proto/README.md says why).
VTPROTO_FILES := proto/yagpcc/segment_service.proto proto/yagpcc/metrics.proto proto/gpotel/v1/taskstats.proto proto/gpotel/v1/pressure.proto
proto: $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/protoc-gen-go-vtproto
	protoc -I proto --go_out=proto --go_opt=paths=source_relative \
		--go-grpc_out=proto --go-grpc_opt=paths=source_relative $(PROTO_FILES)
	protoc -I proto --go-vtproto_out=proto --go-vtproto_opt=paths=source_relative,features=marshal+unmarshal+size $(VTPROTO_FILES)

# Fails when the committed generated code differs from what `make proto` makes.
proto-check: proto
	@git diff --exit-code -- proto || { echo "proto: generated code is stale; run make proto and commit"; exit 1; }

# What follows from internal/pipeline's declarations (figuregen: docs/pipeline.md's
# metric tables, the receiver's metrics and attributes in metadata.yaml, the agent's
# status lines), then mdatagen's code and documentation from every metadata.yaml.
# internal/pipeline/figuregen's test fails while figuregen's copies are stale.
generate: $(BIN)/mdatagen
	$(GO) generate ./internal/pipeline/
	$(GO) generate ./receiver/... ./processor/... ./exporter/... ./connector/...

# Fails when the committed generated files differ from what `make generate` makes.
generate-check: generate
	@git diff --exit-code -- docs receiver processor exporter connector segmentagent || { echo "generate: generated files are stale; run make generate and commit"; exit 1; }

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# go.mod and go.sum as `go mod tidy` leaves them.
tidy-check:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy and commit"; exit 1; }

# No compiled program is committed (.gitignore keeps build outputs out).
no-binaries:
	@bad=$$(git ls-files -z | xargs -0 grep -lP '^\x7fELF' 2>/dev/null); \
	if [ -n "$$bad" ]; then echo "compiled programs committed:"; echo "$$bad"; exit 1; fi

# Puts the license header on every hand-written Go file that lacks it
# (generated files are left to their generators).
spdx:
	@for f in $$(git ls-files '*.go'); do \
		grep -q '^// Code generated .* DO NOT EDIT\.$$' "$$f" && continue; \
		grep -q 'SPDX-License-Identifier' "$$f" && continue; \
		printf '// Copyright The gpotel Authors\n// SPDX-License-Identifier: Apache-2.0\n\n' | cat - "$$f" > "$$f.spdx" && mv "$$f.spdx" "$$f"; \
	done

# gofmt, go vet, go mod tidy, no committed binaries, and golangci-lint with
# .golangci.yml (every exclusion there says why).
lint: fmt vet tidy-check no-binaries $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...

# What the demo (make run) starts, from Debian's packages, when missing:
# PostgreSQL for the testbed (with contrib, for dblink), its server headers
# and a C compiler for the testbed's title extension (testbed/README.md).
demo-deps:
	@need=(); \
	[ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql-15); \
	[ -f /usr/share/postgresql/15/extension/dblink.control ] || need+=(postgresql-contrib); \
	[ -f /usr/include/postgresql/15/server/postgres.h ] || need+=(postgresql-server-dev-15); \
	command -v cc >/dev/null || need+=(gcc); \
	./scripts/install-packages.sh "$${need[@]}"

# What the tests start besides, when missing: Prometheus (and promtool) for
# deploy/ and the Prometheus end-to-end test, systemd-analyze for the unit
# files, iproute2 for the network drill. No package's service is started or
# left enabled (scripts/install-packages.sh): the tests start their own.
testbed-deps: demo-deps
	@need=(); \
	command -v prometheus >/dev/null && command -v promtool >/dev/null || need+=(prometheus); \
	command -v systemd-analyze >/dev/null || need+=(systemd); \
	command -v tc >/dev/null || need+=(iproute2); \
	./scripts/install-packages.sh "$${need[@]}"

unit:
	$(GO) test -count=1 -short ./...

# Packages whose tests start PostgreSQL clusters (they import testbed/cluster).
# Each such package runs several postgres instances, agents and CPU-burning
# workloads, so on two cores two of them at once starve each other: they run
# one at a time (-p 1), after the quick packages, which run in parallel.
DB_PACKAGES = $(shell $(GO) list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | \
	awk '/ github.com\/gpotel\/gpotel\/testbed\/cluster( |$$)/ {print $$1}')
OTHER_PACKAGES = $(filter-out $(DB_PACKAGES),$(shell $(GO) list ./...))

# The e2e tests start build/otelcol-gpotel and build/gpotel-agent: building
# them first keeps the build out of the tests' timeout.
test: testbed-deps victoria-logs proto-check generate-check lint agent collector
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(OTHER_PACKAGES)
	$(GO) test -count=1 -timeout $(DB_TEST_TIMEOUT) -p 1 $(DB_PACKAGES)

# The PostgreSQL-backed packages three times over while two processes burn
# both cores: what `make test` must survive on a loaded machine. The timeout
# is per test binary, which runs its tests STRESS_COUNT times at half the
# machine: testbed/e2e alone takes about 14 minutes a pass on an idle 2-core one.
STRESS_COUNT ?= 3
STRESS_TIMEOUT ?= 150m
test-stress: testbed-deps victoria-logs agent collector
	@./scripts/burn-cpu.sh 2 & burner=$$!; trap 'kill $$burner 2>/dev/null' EXIT; \
	$(GO) test -count=$(STRESS_COUNT) -timeout $(STRESS_TIMEOUT) -p 1 ./testbed/...

# Breaks each rule of scripts/mutate/mutations.txt in one line, in a copy,
# runs the tests the list names and reports the mutations no test caught
# (build/mutate.txt); not part of `make test`. Heavy mutations (their tests
# start PostgreSQL) run only with MUTATE_LOCK, a file flocked while each of
# their tests runs: on a shared machine, MUTATE_LOCK=/tmp/gpotel-heavy.lock.
MUTATE_LOCK ?=
mutate:
	$(GO) run ./scripts/mutate $(if $(MUTATE_LOCK),-lock $(MUTATE_LOCK)) $(if $(MUTATE_ONLY),-only '$(MUTATE_ONLY)')

# Figures go to the terminal and build/bench.txt; a failing benchmark fails the target.
bench: testbed-deps
	@mkdir -p $(BUILD)
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchmem -benchtime 1x -timeout 30m ./... | tee $(BUILD)/bench.txt

# The collector alone at cluster scale (docs/performance.md): 10k, 50k and
# 200k processes, emit_process_metrics off and on; figures to
# build/bench-scale.txt, then the table and docs/collector-scale.svg.
bench-scale: testbed-deps
	@mkdir -p $(BUILD)
	set -o pipefail; $(GO) test -run '^$$' -bench 'CollectorScale' -benchtime 3x -timeout 60m ./testbed/e2e/ | tee $(BUILD)/bench-scale.txt
	$(GO) run ./scripts/scaleplot -o docs/collector-scale.svg < $(BUILD)/bench-scale.txt

# 1M processes (500 hosts x 2000), emit_process_metrics off: about 5
# minutes and 3.5 GiB. (On, at 1M, a tick outgrows its 30 s interval on 2
# cores, so it is not run.) The plot is drawn again with the 1M point, from
# build/bench-scale.txt too when make bench-scale left one.
bench-scale-1m: testbed-deps
	@mkdir -p $(BUILD)
	set -o pipefail; GPOTEL_SCALE_1M=1 $(GO) test -run '^$$' -bench '^BenchmarkCollectorScale$$/^1M$$' -benchtime 3x -timeout 60m ./testbed/e2e/ | tee $(BUILD)/bench-scale-1m.txt
	cat $(wildcard $(BUILD)/bench-scale.txt) $(BUILD)/bench-scale-1m.txt | $(GO) run ./scripts/scaleplot -o docs/collector-scale.svg

# The testbed (gp6, 2 hosts x 2 segments) with agents, the collector and a
# workload, watched through gpotel-top; Ctrl-C or q tears it all down.
run: demo-deps build
	./scripts/run.sh

# .deb and .rpm of gpotel-agent and otelcol-gpotel in build/packages, from
# deploy/packaging (systemd units, default configurations).
PKG_VERSION ?= $(shell sed -n 's/^  version: //p' builder-config.yaml)
PKG_ARCH ?= $(shell $(GO) env GOARCH)
package: agent collector $(BIN)/nfpm
	@mkdir -p $(BUILD)/packages
	set -e; for p in gpotel-agent otelcol-gpotel; do for f in deb rpm; do \
		GPOTEL_VERSION=$(PKG_VERSION) GPOTEL_ARCH=$(PKG_ARCH) \
			$(BIN)/nfpm package --config deploy/packaging/$$p.nfpm.yaml --packager $$f --target $(BUILD)/packages/; \
	done; done

# Every fuzz target for FUZZTIME (executions as Nx, or a duration); CI passes a
# short one. Figures go to the terminal and build/fuzz.txt.
FUZZTIME ?= 1000000x
FUZZTIME_SHORT ?= 20000x
fuzz-short:
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME_SHORT)

fuzz:
	@set -e; mkdir -p $(BUILD); : > $(BUILD)/fuzz.txt; \
	for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v '^./build/' | xargs -n1 dirname | sort -u); do \
		for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			start=$$(date +%s); \
			if ! $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg > $(BUILD)/fuzz-last.log 2>&1; then \
				cat $(BUILD)/fuzz-last.log; echo "fuzz: $$pkg $$target failed"; exit 1; \
			fi; \
			line="$$pkg $$target: $$(grep -o 'execs: [0-9]*' $(BUILD)/fuzz-last.log | tail -1), $$(( $$(date +%s) - start )) s"; \
			echo "$$line" | tee -a $(BUILD)/fuzz.txt; \
		done; \
	done

clean:
	rm -rf $(BUILD)
