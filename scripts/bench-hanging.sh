#!/usr/bin/env bash
# bench-hanging.sh: do hanging targets starve healthy ones? kvwatch serve
# scrapes N simulated SGLang endpoints every 5 s (timeout 4 s); all but
# every tenth of them hang (the simulator's slow fault, answering after an
# hour). Counts the scrapes of each target over a window after a warm-up.
#
#   scripts/bench-hanging.sh [N=1000] [SECONDS=90] [MAX_CONCURRENT=256]
#
# KVWATCH=BIN measures another kvwatch binary (e.g. one built from an
# older commit) instead of building ./cmd/kvwatch. WARMUP=S (default 30)
# lets the first rounds pass. A healthy target on schedule has SECONDS/5
# scrapes in the window.
#
# Needs: go, curl. Prints a Markdown table row for docs/benchmarks.md.
# Everything listens on 127.0.0.1 only; all processes it starts are
# stopped on exit.
set -euo pipefail
N=${1:-1000}
DUR=${2:-90}
MAXC=${3:-256}
WARMUP=${WARMUP:-30}
BASE=${BASE_PORT:-21000} # below the ephemeral port range
KV_PORT=${KV_PORT:-19478}
. "$(dirname "$0")/bench-lib.sh"

if [ -n "${KVWATCH:-}" ]; then
	cp "$KVWATCH" "$work/kvwatch"
else
	go build -o "$work/kvwatch" ./cmd/kvwatch
fi
start_simulator 1
for i in $(seq 0 $((N - 1))); do
	[ $((i % 10)) -eq 0 ] && continue
	curl -fsS -o /dev/null -X POST "http://127.0.0.1:$((BASE + i))/-/sim/fault?kind=slow&delay=1h"
done
"$work/kvwatch" serve --config.file "$work/kvwatch.yml" --web.listen-address "127.0.0.1:$KV_PORT" \
	--scrape.max-concurrent "$MAXC" --history 0 --log.level error 2>"$work/serve.err" &
pids+=($!)
wait_http "http://127.0.0.1:$KV_PORT/-/healthy"
sleep "$WARMUP"
curl -fsS "http://127.0.0.1:$KV_PORT/metrics" >"$work/m0"
sleep "$DUR"
curl -fsS "http://127.0.0.1:$KV_PORT/metrics" >"$work/m1"

# Scrapes per target in the window, healthy (port BASE + 10k) and hanging.
scrapes() { # scrapes FILE: "port count" per target
	sed -n 's/^kvwatch_target_scrapes_total{.*server="127\.0\.0\.1:\([0-9]*\)".*} \([0-9.e+]*\)$/\1 \2/p' "$1" | sort
}
join <(scrapes "$work/m0") <(scrapes "$work/m1") | awk -v base="$BASE" -v dur="$DUR" -v n="$N" -v maxc="$MAXC" \
	-v m0="$(metric_sum "$work/m0" kvwatch_scrape_deadline_misses_total %d)" \
	-v m1="$(metric_sum "$work/m1" kvwatch_scrape_deadline_misses_total %d)" '
	{ d = $3 - $2; if (($1 - base) % 10 == 0) h[nh++] = d; else g[ng++] = d }
	function sort(a, k,   i, j, t) { for (i = 1; i < k; i++) for (j = i; j > 0 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t } }
	END {
		sort(h, nh); sort(g, ng)
		printf "| %d targets, %d hanging, --scrape.max-concurrent %d, %d s | healthy: min %d, median %d, max %d of %d on schedule | hanging: min %d, median %d, max %d | deadline misses %d |\n",
			n, ng, maxc, dur, h[0], h[int(nh/2)], h[nh-1], dur / 5, g[0], g[int(ng/2)], g[ng-1], m1 - m0
	}'
