# kvwatch: the two commands of the README are `make demo` and `make test`.
GO      ?= go
BIN     := bin/kvwatch
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Build information printed by `kvwatch --version`.
BUILD_USER := $(shell id -un 2>/dev/null || echo unknown)@$(shell hostname 2>/dev/null || echo unknown)
BUILD_DATE := $(shell date -u +%Y%m%d-%H:%M:%S)
VPKG    := github.com/prometheus/common/version
LDFLAGS := -X $(VPKG).Version=$(VERSION) \
           -X $(VPKG).Revision=$(shell git rev-parse --short HEAD 2>/dev/null) \
           -X $(VPKG).Branch=$(shell git rev-parse --abbrev-ref HEAD 2>/dev/null) \
           -X $(VPKG).BuildUser=$(BUILD_USER) \
           -X $(VPKG).BuildDate=$(BUILD_DATE)

# Prerequisites (README "Prerequisites"). A missing one stops make with one
# line saying how to get it.
GO_MIN  := 1.26.8
# need,TOOL,HOW: fail with one line when TOOL is not on PATH.
need = @command -v $(1) >/dev/null 2>&1 || { echo "make: $(1) not found: $(2)" >&2; exit 1; }
NEED_GO  = $(call need,$(GO),install Go $(GO_MIN) or newer (https://go.dev/dl/) and put it on PATH)
NEED_NPM = $(call need,npm,install Node.js with npm (Debian/Ubuntu: apt-get install npm); it fetches the web UI's uPlot)
# Go is new enough when the older of the two versions is GO_MIN.
CHECK_GO_VERSION = @v=$$($(GO) env GOVERSION | sed 's/^go//'); \
	[ "$$(printf '%s\n' $(GO_MIN) "$$v" | sort -V | head -n1)" = $(GO_MIN) ] || \
	{ echo "make: Go $$v is too old: install Go $(GO_MIN) or newer (https://go.dev/dl/)" >&2; exit 1; }
# Tools of the end-to-end tests: missing ones make those tests skip
# (fail under KVWATCH_REQUIRE_TOOLS=1, as in .ci/run, which installs them).
TEST_TOOLS := prometheus promtool prometheus-alertmanager amtool chromium tmux systemd-analyze dpkg-deb groff zsh fish etcd

.PHONY: all build assets demo test test-unit bench fuzz vet clean package check-go prometheus3 schema-deps kubectl-validate kube-apiserver helm image image-push chart chart-files

all: build

check-go:
	$(NEED_GO)
	$(CHECK_GO_VERSION)

# Front-end libraries come from npm at build time and are never committed.
# uPlot for the web UI, installed from npm into a gitignored embed directory.
assets: internal/web/static/vendor/uPlot.iife.min.js

internal/web/static/vendor/uPlot.iife.min.js: web/package.json web/package-lock.json
	$(NEED_NPM)
	npm ci --prefix web --no-audit --no-fund
	mkdir -p internal/web/static/vendor
	cp web/node_modules/uplot/dist/uPlot.iife.min.js web/node_modules/uplot/dist/uPlot.min.css internal/web/static/vendor/

build: check-go assets
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kvwatch

# Builds, starts a simulated PD cluster and kvwatch serve with history and
# alerts, prints the URL and a refreshing status line. Ctrl-C stops it all.
demo: build
	./$(BIN) demo

# Every test: unit, golden, fuzz seeds, and the end-to-end tests with real
# Prometheus (Debian's 2.x and 3.x built from source), promtool,
# Alertmanager, Chromium, tmux, etcd and kube-apiserver (see .ci/run).
test: build vet prometheus3 schema-deps kubectl-validate kube-apiserver helm
	@missing=""; for t in $(TEST_TOOLS); do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	[ -z "$$missing" ] || echo "make: not on PATH, their tests skip:$$missing (.ci/run installs them from Debian)" >&2
	KVWATCH_PROMETHEUS3_DIR=$(CURDIR)/$(PROMETHEUS3_DIR) KVWATCH_KUBECTL_VALIDATE_DIR=$(CURDIR)/bin/kubectl-validate \
		KVWATCH_KUBE_APISERVER=$(CURDIR)/bin/kube-apiserver/kube-apiserver KVWATCH_HELM=$(CURDIR)/$(HELM) \
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

# kube-apiserver from the k8s.io/kubernetes module pinned in
# tools/kube-apiserver/go.mod, for the tests against a real Kubernetes API
# server (internal/testenv.KubeAPIServer, with Debian's etcd). About 10
# minutes of CPU the first time, seconds from the Go build cache.
kube-apiserver:
	tools/kube-apiserver/build.sh bin/kube-apiserver

# Helm 4 from the Go module pinned in tools/helm/go.mod, for the chart
# tests (`helm template` of deploy/helm/kvwatch) and `make chart`. Minutes
# the first time, seconds from the Go build cache.
HELM := bin/helm/helm
helm:
	tools/helm/build.sh bin/helm

# The chart's generated files (rules, Alertmanager routes, dashboards):
# `kvwatch stack generate`'s Kubernetes manifests with the default options,
# which the chart's templates read (docs/kubernetes.md). A test fails while
# they differ from what the code generates.
CHART := deploy/helm/kvwatch
chart-files: check-go
	rm -rf dist/chart-files
	$(GO) run ./cmd/kvwatch stack generate --out dist/chart-files > /dev/null
	cp dist/chart-files/kubernetes/prometheusrule.yaml dist/chart-files/kubernetes/alertmanagerconfig.yaml \
	   dist/chart-files/kubernetes/dashboards.yaml $(CHART)/files/

# The container image's tag: the version with every character a tag cannot
# hold as '-' (stack.ImageTag; a test compares the two), dev without one.
IMAGE_REPOSITORY ?= ghcr.io/kvwatch/kvwatch
IMAGE_TAG := $(shell v=$$(printf '%s' '$(VERSION)' | LC_ALL=C sed -e 's/^[.-]*//' -e 's/[^A-Za-z0-9_.-]/-/g' | cut -c1-128); echo "$${v:-dev}")

# The chart packaged as dist/kvwatch-<chart version>.tgz, its appVersion
# (the image tag it defaults to) set to this checkout's IMAGE_TAG.
chart: helm
	mkdir -p dist
	$(HELM) package $(CHART) --app-version '$(IMAGE_TAG)' --destination dist/

# The container image as a tarball (docker load, podman load, skopeo and
# crane read it), built without a container engine by tools/image
# (go-containerregistry): the static binary as entrypoint, user 65534, the
# org.opencontainers.image labels, the host's CA bundle when it has one.
IMG := dist/image
image: check-go assets
	rm -rf $(IMG) && mkdir -p $(IMG)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(IMG)/kvwatch ./cmd/kvwatch
	$(GO) -C tools/image build -o $(CURDIR)/$(IMG)/image-builder .
	$(IMG)/image-builder --binary $(IMG)/kvwatch --out dist/kvwatch-image.tar \
	  --ref '$(IMAGE_REPOSITORY):$(IMAGE_TAG)' --version '$(VERSION)' --arch $$($(GO) env GOARCH) \
	  --revision "$$(git rev-parse HEAD 2>/dev/null)" \
	  --created "$$(git log -1 --format=%cI 2>/dev/null | grep . || date -u +%Y-%m-%dT%H:%M:%SZ)" \
	  $$([ -f /etc/ssl/certs/ca-certificates.crt ] && echo --ca-certificates /etc/ssl/certs/ca-certificates.crt)

# The image pushed to IMAGE_REPOSITORY:IMAGE_TAG with crane (pinned in
# tools/image/go.mod), with the credentials of ~/.docker/config.json.
image-push: image
	$(GO) -C tools/image tool crane push $(CURDIR)/dist/kvwatch-image.tar '$(IMAGE_REPOSITORY):$(IMAGE_TAG)'

# @grafana/schema and TypeScript for the dashboards' schema check
# (tools/grafana-schema/check.mjs, run by internal/stack's tests).
schema-deps: tools/grafana-schema/node_modules/.package-lock.json

tools/grafana-schema/node_modules/.package-lock.json: tools/grafana-schema/package.json tools/grafana-schema/package-lock.json
	npm ci --prefix tools/grafana-schema --no-audit --no-fund

# go.mod must be tidy; go vet and staticcheck must be clean. staticcheck is
# pinned in tools/go.mod and built from the module cache (offline once
# downloaded) into bin/.
STATICCHECK := bin/staticcheck

$(STATICCHECK): tools/go.mod tools/go.sum
	$(GO) build -C tools -o ../$(STATICCHECK) honnef.co/go/tools/cmd/staticcheck

vet: $(STATICCHECK)
	$(GO) mod tidy -diff
	$(GO) mod tidy -C tools -diff
	$(GO) mod tidy -C tools/image -diff
	$(GO) mod tidy -C tools/helm -diff
	$(GO) vet ./...
	./$(STATICCHECK) ./...

# A Debian package in dist/: the binary (static, with the build information
# above), shell completions, the man page and the hardened systemd unit, all
# generated by the binary itself; built with nfpm from tools/nfpm (a module
# of its own, so kvwatch's go.mod stays clean). docs/installation.md.
PKG := dist/package
DEB_VERSION ?= $(shell packaging/deb-version '$(VERSION)')

package: check-go assets
	rm -rf $(PKG) && mkdir -p $(PKG)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(PKG)/kvwatch ./cmd/kvwatch
	rm -f dist/kvwatch_*.deb
	$(PKG)/kvwatch --completion-script-bash > $(PKG)/kvwatch.bash
	$(PKG)/kvwatch --completion-script-zsh > $(PKG)/_kvwatch
	$(PKG)/kvwatch --completion-script-fish > $(PKG)/kvwatch.fish
	$(PKG)/kvwatch --help-man | gzip -9n > $(PKG)/kvwatch.1.gz
	$(PKG)/kvwatch stack generate --out $(PKG)/stack --install.dir /etc/kvwatch > /dev/null
	cp $(PKG)/stack/kvwatch.yml $(PKG)/kvwatch.yml
	sed -e '1s|.*|# kvwatch.service of the kvwatch Debian package: the unit `kvwatch stack generate` writes, run from /usr/bin.|' \
	    -e 's|^ExecStart=/usr/local/bin/kvwatch |ExecStart=/usr/bin/kvwatch |' \
	    $(PKG)/stack/systemd/kvwatch.service > $(PKG)/kvwatch.service
	@grep -q '^ExecStart=/usr/bin/kvwatch serve --config.file=/etc/kvwatch/kvwatch.yml ' $(PKG)/kvwatch.service || \
	  { echo "make: the generated kvwatch.service changed its ExecStart; update the package target" >&2; exit 1; }
	$(GO) -C tools/nfpm build -o $(CURDIR)/bin/nfpm github.com/goreleaser/nfpm/v2/cmd/nfpm
	DEB_VERSION='$(DEB_VERSION)' GOARCH=$$($(GO) env GOARCH) bin/nfpm package --config packaging/nfpm.yaml --packager deb --target dist/

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
	rm -rf bin dist test-artifacts
