#!/usr/bin/env bash
# soak-hostile.sh: kvwatch serve, history on (5 minutes, a snapshot file),
# against every kind of hostile target for a long time: the targets of
# internal/cli's hostile tests (escape sequences, secrets in URLs, a
# cardinality bomb, a 1 MiB label, a redirect) and of the soak (NaN and
# infinite values, a counter that only goes down, labels that change on
# every page, a slow-loris body, endless headers, an endless body, a gzip
# bomb, a hang-up), beside one real SGLang page, all scraped every 2 s.
# serve's resident memory and CPU are read from /proc every 10 s.
#
#   scripts/soak-hostile.sh [DURATION=10m]
#
# It runs TestSoakHostile (internal/cli/soak_test.go) with KVWATCH_SOAK set:
# the test builds ./cmd/kvwatch, starts the targets (on 127.0.0.1 only) and
# serve, samples, and fails when serve's RSS or the history's series pass
# their bounds (soakRSSBound, soakSeriesBound) or serve stops answering.
# Without KVWATCH_SOAK the same test runs for 60 s in the test suite.
#
# Needs: go. Prints the machine, the load average before, and a Markdown
# table for docs/benchmarks.md ("Hostile soak"). Every process it starts is
# stopped when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10m}
report=$(mktemp)
out=$(mktemp)
trap 'rm -f "$report" "$out"' EXIT
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(go version | cut -d' ' -f3), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
KVWATCH_SOAK=$DUR KVWATCH_SOAK_REPORT=$report go test ./internal/cli/ -run '^TestSoakHostile$' -count=1 -timeout 0 -v >"$out" 2>&1 || status=$?
grep -vE '^\s*\|' "$out" # the test's verdict and errors; the table follows
echo
cat "$report"
exit $status
