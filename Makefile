# kvwatch: the two commands of the README are `make demo` and `make test`.
GO      ?= go
BIN     := bin/kvwatch
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/prometheus/common/version.Version=$(VERSION) \
           -X github.com/prometheus/common/version.Revision=$(shell git rev-parse --short HEAD 2>/dev/null)

.PHONY: all build assets demo test test-unit bench fuzz vet clean prometheus3 schema-deps kubectl-validate

all: build

# Front-end libraries come from npm at build time and are never committed.
# uPlot for the web UI, installed from npm into a gitignored embed directory.
assets: internal/web/static/vendor/uPlot.iife.min.js

internal/web/static/vendor/uPlot.iife.min.js: web/package.json web/package-lock.json
	npm ci --prefix web --no-audit --no-fund
	mkdir -p internal/web/static/vendor
	cp web/node_modules/uplot/dist/uPlot.iife.min.js web/node_modules/uplot/dist/uPlot.min.css internal/web/static/vendor/

build: assets
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kvwatch

# Builds, starts a simulated PD cluster and kvwatch serve with history and
# alerts, prints the URL and a refreshing status line. Ctrl-C stops it all.
demo: build
	./$(BIN) demo

# Every test: unit, golden, fuzz seeds, and the end-to-end tests with real
# Prometheus (Debian's 2.x and 3.x built from source), promtool,
# Alertmanager, Chromium and tmux (see .ci/run).
test: build vet prometheus3 schema-deps kubectl-validate
	KVWATCH_PROMETHEUS3_DIR=$(CURDIR)/$(PROMETHEUS3_DIR) KVWATCH_KUBECTL_VALIDATE_DIR=$(CURDIR)/bin/kubectl-validate \
		$(GO) test -race -timeout 30m ./...

# Prometheus 3 and promtool 3 from the Go module pinned in
# tools/prometheus3/go.mod, for the version matrix of the stack tests
# (docs/stack.md). Minutes the first time, seconds from the Go build cache.
PROMETHEUS3_DIR := bin/prometheus3
prometheus3:
	tools/prometheus3/build.sh $(PROMETHEUS3_DIR)

# kubectl-validate and the Prometheus Operator CRDs (made by controller-gen
# from the operator API module in go.mod) for the manifest validation test.
# A few minutes the first time, seconds from the Go build cache.
kubectl-validate:
	tools/kubectl-validate/build.sh bin/kubectl-validate

# @grafana/schema and TypeScript for the dashboards' schema check
# (tools/grafana-schema/check.mjs, run by internal/stack's tests).
schema-deps: tools/grafana-schema/node_modules/.package-lock.json

tools/grafana-schema/node_modules/.package-lock.json: tools/grafana-schema/package.json tools/grafana-schema/package-lock.json
	npm ci --prefix tools/grafana-schema --no-audit --no-fund

vet:
	$(GO) vet ./...

# Benchmarks recorded in docs/benchmarks.md.
bench:
	$(GO) test -run '^$$' -bench BenchmarkParse -benchmem -count 5 ./internal/engine/
	$(GO) test -run '^$$' -bench . -benchmem ./internal/sim/ ./internal/tui/

# A short fuzzing pass over the parsers.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./internal/expo/
	$(GO) test -run '^$$' -fuzz FuzzNormalize -fuzztime 60s -fuzzminimizetime 3s ./internal/engine/
	$(GO) test -run '^$$' -fuzz FuzzConsistent -fuzztime 30s -fuzzminimizetime 3s ./internal/engine/

clean:
	rm -rf bin test-artifacts
