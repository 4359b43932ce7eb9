#!/usr/bin/env bash
# bench-discovery.sh: kvwatch serve discovering PODS llm-d pods from a real
# kube-apiserver (testenv.KubeAPIServer: Debian's etcd and the
# kube-apiserver of tools/kube-apiserver), then CHURN pods a minute
# replaced for MINUTES, then MISTAKE more pods matched by an over-broad
# entry (refused by its target_limit). The engines are `kvwatch simulate`
# SGLang servers on loopback, one per 25 pods. Measures serve's own
# process from its /metrics: resident memory, Go heap, CPU, goroutines;
# checks that no target or series is left behind after the churn.
#
#   scripts/bench-discovery.sh [PODS=5000] [CHURN=100] [MINUTES=5] [MISTAKE=10000]
#
# INTERVAL=D sets serve's scrape interval (default 15s). KVWATCH=BIN
# measures another kvwatch binary instead of building ./cmd/kvwatch.
# Needs: go, etcd (Debian's etcd-server), bin/kube-apiserver (make
# kube-apiserver) or KVWATCH_KUBE_APISERVER. Prints Markdown table rows for
# docs/benchmarks.md. Everything listens on 127.0.0.1 only.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${KVWATCH:-}" ]; then
	cp "$KVWATCH" "$work/kvwatch"
else
	go build -o "$work/kvwatch" ./cmd/kvwatch
fi
KVWATCH_BENCH_KVWATCH="$work/kvwatch" KVWATCH_BENCH_DISCOVERY="${1:-5000}" KVWATCH_BENCH_CHURN="${2:-100}" \
	KVWATCH_BENCH_CHURN_MINUTES="${3:-5}" KVWATCH_BENCH_MISTAKE="${4:-10000}" KVWATCH_BENCH_INTERVAL="${INTERVAL:-15s}" \
	go test ./internal/discovery -run '^TestDiscoveryScale$' -count=1 -v -timeout 120m 2>&1 |
	grep -E '^\s+scale_test.go:[0-9]+: |^(--- |ok|FAIL)' | sed 's/^\s*scale_test.go:[0-9]*: //'
