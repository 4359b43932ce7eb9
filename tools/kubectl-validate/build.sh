#!/usr/bin/env bash
# Builds kubectl-validate and controller-gen from the modules pinned in
# tools/kubectl-validate/go.mod and tools/controller-gen/go.mod into $1 (default bin/kubectl-validate at the repo root),
# then generates the Prometheus Operator CRDs (ServiceMonitor, PodMonitor,
# PrometheusRule, ... from monitoring/v1; AlertmanagerConfig, ... from
# monitoring/v1alpha1) into $1/crds from the operator API module kvwatch's
# own go.mod requires, so the CRDs match the types the manifests are built
# from, and copies KEDA's CRDs (ScaledObject, ...) there from the KEDA module
# pinned in tools/keda-crds/go.mod. A few minutes the first time, seconds
# from the Go build and module caches.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/bin/kubectl-validate}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$here"
go build -trimpath -o "$out/" sigs.k8s.io/kubectl-validate
cd "$here/../controller-gen"
go build -trimpath -o "$out/" sigs.k8s.io/controller-tools/cmd/controller-gen
cd "$root"
rm -rf "$out/crds"
"$out/controller-gen" crd:allowDangerousTypes=true,maxDescLen=0 \
  paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 \
  paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1 \
  output:crd:dir="$out/crds"
(cd "$here/../keda-crds" && go mod download github.com/kedacore/keda/v2)
keda="$(cd "$here/../keda-crds" && go list -m -f '{{.Dir}}' github.com/kedacore/keda/v2)"
cp "$keda"/config/crd/bases/keda.sh_*.yaml "$out/crds/"
chmod u+w "$out"/crds/keda.sh_*.yaml
ls "$out/crds" | tr '\n' ' '; echo
