#!/usr/bin/env bash
# bench-serve.sh: CPU cost of kvwatch serve scraping N simulated SGLang TP=8
# endpoints every 5 s, next to the Debian prometheus binary scraping the same
# raw endpoints with the same interval, one after the other, in one session.
#
#   scripts/bench-serve.sh [N=2000] [SECONDS=180]
#
# INTERVAL=S scrapes every S seconds (default 5; at least 5). HISTORY=0
# runs serve without history and rules (the scrape, the adapters and the
# exporter alone: what Prometheus' side does, without its TSDB).
# SIM_PROCS=K splits the simulator over K processes. SKIP_PROMETHEUS=1
# measures kvwatch only (for fleets whose Prometheus would not fit in
# memory). PROFILE=DIR keeps a CPU profile of kvwatch serve taken over the middle of
# its window (go tool pprof -top DIR/kvwatch.cpu.prof), and the allocations
# over the same time (go tool pprof -sample_index=alloc_space -top
# DIR/kvwatch.allocs.prof), and serve's /api/v1/rules at the end (each
# rule's last evaluationTime, in DIR/kvwatch.rules.json). PROMETHEUS=BIN
# measures another Prometheus binary (e.g. a Prometheus 3 build) instead of
# the one on PATH. The simulator's own CPU in each window is reported apart
# (utime + stime from /proc/PID/stat), and the load average before each.
#
# Each scraper is measured over the same kind of window: its CPU
# (utime + stime from /proc/PID/stat) and its scrapes (the metrics pages the
# simulator served, GET /-/sim/pages), read one after the other at both
# ends, between the two /metrics snapshots taken for the other figures
# (deadline misses, targets up, series). The first four passes of
# docs/benchmarks.md used the self-reported counters of those snapshots
# (process_cpu_seconds_total, kvwatch_target_scrapes_total), which put one
# exposition of kvwatch's whole fleet (114,000 lines at 2,000 targets) in
# its window; that figure is printed too, for comparison.
#
# Needs: go, curl, prometheus (Debian package "prometheus") on PATH.
# Prints a Markdown table for docs/benchmarks.md. Everything listens on
# 127.0.0.1 only; all processes it starts are stopped on exit.
set -euo pipefail
N=${1:-2000}
DUR=${2:-180}
INTERVAL=${INTERVAL:-5}
[ "$INTERVAL" -ge 5 ] || { echo "INTERVAL must be at least 5 (the scrape timeout is 4s)" >&2; exit 1; }
WARMUP=${WARMUP:-15}
BASE=${BASE_PORT:-20000} # below the ephemeral port range, so no outgoing connection holds one
KV_PORT=${KV_PORT:-19477}
PROM_PORT=${PROM_PORT:-19090}
HZ=$(getconf CLK_TCK)
. "$(dirname "$0")/bench-lib.sh"

snapshot() { # snapshot URL FILE: fetch /metrics once; print "wall_seconds fetch_seconds"
	local t0 t1
	t0=$(date +%s.%N)
	curl -fsS "$1" >"$2"
	t1=$(date +%s.%N)
	echo "$t0 $(awk -v a="$t1" -v b="$t0" 'BEGIN { print a - b }')"
}

go build -o "$work/kvwatch" ./cmd/kvwatch
PROM=${PROMETHEUS:-prometheus}
command -v "$PROM" >/dev/null || { echo "$PROM not found: apt-get install prometheus" >&2; exit 1; }
cpu_ticks() { # utime + stime of the given pids, summed
	local p t=0
	for p in "$@"; do t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}'))); done
	echo $t
}
load() { cut -d' ' -f1-3 /proc/loadavg; }

# 1. The simulator: N SGLang servers with 8 TP ranks each.
start_simulator 8
pages() { # the metrics pages the simulator processes have served, summed
	local i t=0
	for i in $(seq 0 $((${SIM_PROCS:-1} - 1))); do t=$((t + $(curl -fsS "http://127.0.0.1:$((BASE + i * N / ${SIM_PROCS:-1}))/-/sim/pages"))); done
	echo $t
}

# 2. kvwatch serve.
"$work/kvwatch" serve --config.file "$work/kvwatch.yml" --web.listen-address "127.0.0.1:$KV_PORT" --log.level warn ${HISTORY:+--history "$HISTORY"} 2>"$work/serve.err" &
kv=$!
pids+=($kv)
wait_http "http://127.0.0.1:$KV_PORT/-/ready"
sleep "$WARMUP"
kv_m="http://127.0.0.1:$KV_PORT/metrics"
kload=$(load)
read -r kt0 _ < <(snapshot "$kv_m" "$work/kv0.prom")
ks0=$(cpu_ticks "${sims[@]}")
# The window: kvwatch's CPU from /proc and the pages the simulator served
# it, between the two /metrics snapshots (which are not part of it).
kw0=$(date +%s.%N); kc0=$(cpu_ticks $kv); kp0=$(pages)
if [ -n "${PROFILE:-}" ]; then
	mkdir -p "$PROFILE"
	psec=$((DUR > 20 ? DUR - 10 : DUR / 2))
	(sleep 5; curl -fsS -o "$PROFILE/kvwatch.cpu.prof" "http://127.0.0.1:$KV_PORT/debug/pprof/profile?seconds=$psec") &
	(sleep 5; curl -fsS -o "$PROFILE/kvwatch.allocs.prof" "http://127.0.0.1:$KV_PORT/debug/pprof/allocs?seconds=$psec") &
fi
sleep "$DUR"
kp1=$(pages); kc1=$(cpu_ticks $kv); kw1=$(date +%s.%N)
[ -n "${PROFILE:-}" ] && [ "${HISTORY:-}" != 0 ] && curl -fsS -o "$PROFILE/kvwatch.rules.json" "http://127.0.0.1:$KV_PORT/api/v1/rules"
ks1=$(cpu_ticks "${sims[@]}")
read -r kt1 kfetch < <(snapshot "$kv_m" "$work/kv1.prom")
c0=$(metric_sum "$work/kv0.prom" process_cpu_seconds_total); c1=$(metric_sum "$work/kv1.prom" process_cpu_seconds_total)
s0=$(metric_sum "$work/kv0.prom" kvwatch_target_scrapes_total); s1=$(metric_sum "$work/kv1.prom" kvwatch_target_scrapes_total)
m0=$(metric_sum "$work/kv0.prom" kvwatch_scrape_deadline_misses_total); m1=$(metric_sum "$work/kv1.prom" kvwatch_scrape_deadline_misses_total)
up=$(metric_sum "$work/kv1.prom" kvwatch_target_up)
kseries=$(grep -vc '^#' "$work/kv1.prom")
rss_kv=$(awk '/VmHWM/ {print $2}' "/proc/$kv/status")
kill $kv; wait $kv 2>/dev/null || true

# 3. Prometheus, same targets, same interval.
if [ -n "${SKIP_PROMETHEUS:-}" ]; then
	pt0=0 pt1=1 p0=0 p1=0 q0=0 q1=0 rss_pr=0 ps0=0 ps1=0 pload=- pw0=0 pw1=1 pc0=0 pc1=0 pp0=0 pp1=0
else
cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: ${INTERVAL}s
  scrape_timeout: 4s
scrape_configs:
  - job_name: sglang
    file_sd_configs:
      - files: ['$work/targets.json']
YAML
"$PROM" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prom" \
	--web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn 2>"$work/prom.err" &
pr=$!
pids+=($pr)
wait_http "http://127.0.0.1:$PROM_PORT/-/ready"
sleep "$WARMUP"
pr_m="http://127.0.0.1:$PROM_PORT/metrics"
pload=$(load)
read -r pt0 _ < <(snapshot "$pr_m" "$work/pr0.prom")
ps0=$(cpu_ticks "${sims[@]}")
pw0=$(date +%s.%N); pc0=$(cpu_ticks $pr); pp0=$(pages)
sleep "$DUR"
pp1=$(pages); pc1=$(cpu_ticks $pr); pw1=$(date +%s.%N)
ps1=$(cpu_ticks "${sims[@]}")
read -r pt1 _ < <(snapshot "$pr_m" "$work/pr1.prom")
p0=$(metric_sum "$work/pr0.prom" process_cpu_seconds_total); p1=$(metric_sum "$work/pr1.prom" process_cpu_seconds_total)
q0=$(metric_sum "$work/pr0.prom" prometheus_target_interval_length_seconds_count); q1=$(metric_sum "$work/pr1.prom" prometheus_target_interval_length_seconds_count)
rss_pr=$(awk '/VmHWM/ {print $2}' "/proc/$pr/status")
kill $pr; wait $pr 2>/dev/null || true

fi

awk -v n="$N" -v kw="$(awk -v a="$kw1" -v b="$kw0" 'BEGIN { print a - b }')" -v pw="$(awk -v a="$pw1" -v b="$pw0" 'BEGIN { print a - b }')" \
	-v kc="$(((kc1 - kc0)))" -v ks="$((kp1 - kp0))" -v pc="$((pc1 - pc0))" -v qs="$((pp1 - pp0))" \
	-v c0="$c0" -v c1="$c1" -v s0="$s0" -v s1="$s1" -v m0="$m0" -v m1="$m1" -v up="$up" \
	-v p0="$p0" -v p1="$p1" -v q0="$q0" -v q1="$q1" -v rk="$rss_kv" -v rp="$rss_pr" -v pb="$page_bytes" -v ps="$page_samples" \
	-v kf="$kfetch" -v ks_="$kseries" -v warm="$WARMUP" -v pv="$("$PROM" --version 2>&1 | head -1)" \
	-v hz="$HZ" -v ks0="$ks0" -v ks1="$ks1" -v ps0="$ps0" -v ps1="$ps1" -v kl="$kload" -v pl="$pload" -v sp="${SIM_PROCS:-1}" -v iv="$INTERVAL" -v hist="$( [ "${HISTORY:-}" = 0 ] && echo 'off (no rules)' || echo "${HISTORY:-1h}, rules every 15s")" 'BEGIN {
	kc /= hz; pc /= hz
	printf "endpoints: %d SGLang TP=8 (page: %d bytes, %d samples), interval %ds, kvwatch history %s, measured over %.0f s (kvwatch) and %.0f s (Prometheus) after a %d s warm-up\n", n, pb, ps, iv, hist, kw, pw, warm
	printf "(CPU from /proc/PID/stat, scrapes as the pages the simulator served, between the /metrics snapshots)\n\n"
	printf "| scraper | CPU-seconds | scrapes | CPU-s per 1,000 scrapes | average cores | peak RSS | notes |\n| --- | --- | --- | --- | --- | --- | --- |\n"
	printf "| kvwatch serve | %.1f | %d | %.3f | %.3f | %d MiB | deadline misses: %d; targets up: %d of %d |\n", kc, ks, kc / ks * 1000, kc / kw, rk / 1024, m1 - m0, up, n
	if (qs > 0) {
		printf "| %s | %.1f | %d | %.3f | %.3f | %d MiB | stores every sample in its TSDB |\n", pv, pc, qs, pc / qs * 1000, pc / pw, rp / 1024
		printf "\nkvwatch / Prometheus CPU per scrape: %.2f\n", (kc / ks) / (pc / qs)
	} else {
		printf "\nPrometheus not measured (SKIP_PROMETHEUS)\n"
	}
	printf "kvwatch per endpoint at %d s: %.2f ms of CPU per scrape, %.5f cores per endpoint, %.0f endpoints per core (%.0f at 5 s)\n", iv, kc / ks * 1000, kc / kw / n, n / (kc / kw), 5000 / (kc / ks * 1000)
	# As the first four passes measured: process_cpu_seconds_total and the
	# scrape counters of the two /metrics snapshots, so one exposition of
	# the whole fleet falls in kvwatch'"'"'s window.
	oc = c1 - c0; os = s1 - s0; opc = p1 - p0; oqs = q1 - q0
	if (oqs > 0)
		printf "as passes 1-4 measured (self-reported counters of the snapshots): kvwatch %.3f, Prometheus %.3f CPU-s per 1,000 scrapes, ratio %.2f\n", oc / os * 1000, opc / oqs * 1000, (oc / os) / (opc / oqs)
	else
		printf "as passes 1-4 measured (self-reported counters of the snapshots): kvwatch %.3f CPU-s per 1,000 scrapes\n", oc / os * 1000
	printf "kvwatch /metrics for all %d targets: %d lines, fetched in %.2f s\n", n, ks_, kf
	printf "simulator CPU in the windows (%d processes): %.1f CPU-s (%.3f cores) under kvwatch, %.1f CPU-s (%.3f cores) under Prometheus\n", sp, (ks1 - ks0) / hz, (ks1 - ks0) / hz / kw, (ps1 - ps0) / hz, (ps1 - ps0) / hz / pw
	printf "load average before the windows: %s (kvwatch), %s (Prometheus)\n", kl, pl
}'
