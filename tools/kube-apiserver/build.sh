#!/usr/bin/env bash
# Builds kube-apiserver from the k8s.io/kubernetes module pinned in this
# directory's go.mod into the directory given as $1 (default
# bin/kube-apiserver at the repo root), for the tests that run against a
# real Kubernetes API server (internal/testenv.KubeAPIServer; etcd comes
# from Debian's etcd-server). The first build takes minutes; later ones come
# from the Go build cache in seconds (docs/benchmarks.md).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../bin/kube-apiserver}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$here"
# The version kube-apiserver --version prints; k8s.io/kubernetes' own build
# sets the same variables from git.
version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
IFS=. read -r major minor _ <<<"${version#v}"
pkg=k8s.io/component-base/version
start=$(date +%s)
GOFLAGS=-mod=readonly go build -trimpath \
  -ldflags "-X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
  -o "$out/" k8s.io/kubernetes/cmd/kube-apiserver
"$out/kube-apiserver" --version
echo "kube-apiserver $version: built in $(( $(date +%s) - start )) s" >&2
