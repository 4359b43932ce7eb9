#!/usr/bin/env bash
# Builds victoria-metrics, vmagent, vmalert and vmalert-tool from the
# VictoriaMetrics Go module pinned in go.mod (v1.151.0) into a cache directory,
# once: a second run with the same go.sum returns at once. Prints the
# directory. The fleet tests (internal/fleet) find the binaries there, or on
# PATH, or in KVWATCH_VM_BIN.
#
#   KVWATCH_TOOLS_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/kvwatch/tools)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="$(awk '$1=="github.com/VictoriaMetrics/VictoriaMetrics"{print $2; exit}' "$here/go.mod")"
if [ -z "$version" ]; then
  version="$(grep -o 'github.com/VictoriaMetrics/VictoriaMetrics v[0-9.]*' "$here/go.mod" | head -1 | cut -d' ' -f2)"
fi
root="${KVWATCH_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvwatch/tools}"
out="$root/victoriametrics-$version"
stamp="$out/.go.sum.sha256"
want="$(sha256sum "$here/go.sum" | cut -d' ' -f1)"
tools=(victoria-metrics vmagent vmalert vmalert-tool)

have=1
for t in "${tools[@]}"; do [ -x "$out/$t" ] || have=0; done
if [ "$have" = 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$out"
  exit 0
fi

mkdir -p "$out"
start=$(date +%s)
pkgs=()
for t in "${tools[@]}"; do pkgs+=("github.com/VictoriaMetrics/VictoriaMetrics/app/$t"); done
# Pure Go (no C compiler needed), stripped, reproducible paths.
(cd "$here" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags '-s -w' -o "$out/" "${pkgs[@]}")
echo "$want" >"$stamp"
echo "victoriametrics $version: built ${tools[*]} in $(( $(date +%s) - start )) s" >&2
echo "$out"
