#!/usr/bin/env bash
# Builds Helm 4 from the module pinned in this directory's go.mod into the
# directory given as $1 (default bin/helm at the repo root), for the chart
# tests of deploy/helm/kvwatch (`helm template`, then kubectl-validate).
# The first build takes minutes; later ones come from the Go build cache in
# seconds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../bin/helm}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$here"
mod="$(go list -m -f '{{.Version}}' helm.sh/helm/v4)"
go build -trimpath -ldflags "-X helm.sh/helm/v4/internal/version.version=$mod" -o "$out/" helm.sh/helm/v4/cmd/helm
"$out/helm" version --short
