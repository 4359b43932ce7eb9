#!/usr/bin/env bash
# Builds Prometheus 3 and promtool 3 from the module pinned in this
# directory's go.mod into the directory given as $1 (default
# bin/prometheus3 at the repo root). The first build takes minutes (about
# 7 on 2 cores); later ones come from the Go build cache in seconds.
# The web UI's assets are not part of the Go module: the HTTP API and
# /-/ready work, the UI pages do not (the tests use only the API).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../bin/prometheus3}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$here"
# v0.316.0 is Prometheus 3.16.0 (the Go module's v0.MAJOR*100+MINOR.PATCH).
mod="$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus)"
IFS=. read -r _ mm patch <<<"${mod#v}"
version="$((mm / 100)).$((mm % 100)).$patch"
go build -trimpath -ldflags "-X github.com/prometheus/common/version.Version=$version -X github.com/prometheus/common/version.Branch=module-$mod" -o "$out/" \
  github.com/prometheus/prometheus/cmd/prometheus \
  github.com/prometheus/prometheus/cmd/promtool
"$out/prometheus" --version | head -1
