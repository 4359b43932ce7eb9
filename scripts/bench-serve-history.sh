#!/usr/bin/env bash
# bench-serve-history.sh: memory and CPU of kvwatch serve with a 24 h
# history, scraping N simulated SGLang endpoints (TP ranks each) every 5 s.
# The 24 h are compressed: serve first scrapes for SEED_SECONDS with history
# on and writes its snapshot on shutdown; the history package's
# BenchmarkSnapshot24h then fills 24 h (plus the coarse tier's trim slack) at
# 5 s for exactly those series, replaying each one's observed steps, and
# writes a snapshot ending now; serve is restarted on it with --history 24h
# and measured while it scrapes the live simulator for SECONDS.
#
#   scripts/bench-serve-history.sh [N=1000] [SECONDS=360] [TP=2]
#
# ARTIFACTS=DIR keeps the snapshots, the RSS timeline and a heap profile
# taken at the end (go tool pprof -sample_index=inuse_space DIR/heap.prof);
# SNAPSHOT=FILE skips steps 2 and 3 and restores serve from FILE (a 24 h
# snapshot kept by an earlier run with the same N and TP).
#
# Needs: go, curl. Prints a Markdown summary for docs/benchmarks.md. Resident
# memory is read from /proc/PID/status (VmRSS, VmHWM), CPU from
# /proc/PID/stat (utime + stime). Everything listens on 127.0.0.1 only; all
# processes it starts are stopped on exit.
set -euo pipefail
N=${1:-1000}
DUR=${2:-360}
TP=${3:-2}
SEED_SECONDS=${SEED_SECONDS:-120}
WARMUP=${WARMUP:-15}
BASE=${BASE_PORT:-23000} # below the ephemeral port range
KV_PORT=${KV_PORT:-19478}
HZ=$(getconf CLK_TCK)
. "$(dirname "$0")/bench-lib.sh"

status_kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }   # status_kb PID VmRSS
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; } # utime + stime
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

go build -o "$work/kvwatch" ./cmd/kvwatch
go test -c -o "$work/history.test" ./internal/history

# 1. The simulator: N SGLang servers with TP ranks each.
start_simulator "$TP"
serve() { # serve SNAPSHOT_FILE: start kvwatch serve with a 24 h history
	"$work/kvwatch" serve --config.file "$work/kvwatch.yml" --web.listen-address "127.0.0.1:$KV_PORT" \
		--history 24h --history.snapshot-file "$1" --log.level warn 2>>"$work/serve.err" &
	kv=$!
	pids+=($kv)
}

if [ -n "${SNAPSHOT:-}" ]; then
	cp "$SNAPSHOT" "$work/24h.snap"
	seed_rss=0 seed_hwm=0 gen="(restored from $SNAPSHOT)"
else
	# 2. Seed: serve with history on for SEED_SECONDS; its snapshot on
	# shutdown holds every series it records.
	serve "$work/seed.snap"
	wait_http "http://127.0.0.1:$KV_PORT/-/ready"
	sleep "$SEED_SECONDS"
	seed_rss=$(status_kb $kv VmRSS) seed_hwm=$(status_kb $kv VmHWM)
	kill -TERM $kv
	wait $kv || { echo "serve failed:" >&2; cat "$work/serve.err" >&2; exit 1; }
	[ -s "$work/seed.snap" ] || { echo "serve wrote no snapshot:" >&2; cat "$work/serve.err" >&2; exit 1; }

	# 3. The compressed 24 h for exactly those series.
	KVWATCH_BENCH_SEED_SNAPSHOT="$work/seed.snap" KVWATCH_BENCH_SNAPSHOT="$work/24h.snap" \
		"$work/history.test" -test.run '^$' -test.bench 'Snapshot24h' -test.benchtime 1x >"$work/gen.out"
	gen=$(grep '^BenchmarkSnapshot24h' "$work/gen.out") || { cat "$work/gen.out" >&2; exit 1; }
	[ -n "${ARTIFACTS:-}" ] && mkdir -p "$ARTIFACTS" && cp "$work/seed.snap" "$work/24h.snap" "$ARTIFACTS/"
fi
snap_bytes=$(stat -c %s "$work/24h.snap")

# 4. Serve restored from it, scraping the live simulator.
t_start=$(now)
serve "$work/24h.snap"
wait_http "http://127.0.0.1:$KV_PORT/-/ready"
t_ready=$(now)
ready_rss=$(status_kb $kv VmRSS) ready_hwm=$(status_kb $kv VmHWM) ready_cpu=$(cpu_ticks $kv)
sleep "$WARMUP"
curl -fsS "http://127.0.0.1:$KV_PORT/metrics" >"$work/m0.prom"
c0=$(cpu_ticks $kv) t0=$(now)
max_rss=0 min_rss=999999999 sum_rss=0 n_rss=0
end=$(($(date +%s) + DUR))
while [ "$(date +%s)" -lt "$end" ]; do
	r=$(status_kb $kv VmRSS)
	[ "$r" -gt "$max_rss" ] && max_rss=$r
	[ "$r" -lt "$min_rss" ] && min_rss=$r
	sum_rss=$((sum_rss + r)) n_rss=$((n_rss + 1))
	echo "$(secs "$t_start" "$(now)") $r $(status_kb $kv VmHWM)" >>"$work/rss.txt"
	sleep 5
done
c1=$(cpu_ticks $kv) t1=$(now)
end_rss=$(status_kb $kv VmRSS) end_hwm=$(status_kb $kv VmHWM)
curl -fsS "http://127.0.0.1:$KV_PORT/metrics" >"$work/m1.prom"
if [ -n "${ARTIFACTS:-}" ]; then
	mkdir -p "$ARTIFACTS"
	curl -fsS -o "$ARTIFACTS/heap.prof" "http://127.0.0.1:$KV_PORT/debug/pprof/heap"
	cp "/proc/$kv/smaps" "$ARTIFACTS/smaps"
	cp "$work/rss.txt" "$work/m1.prom" "$ARTIFACTS/"
fi
# After the memory readings: how much the history holds (this query reads
# every sample of one series per endpoint).
held=$(curl -fsS "http://127.0.0.1:$KV_PORT/api/v1/query" --data-urlencode 'query=sum(count_over_time(kvwatch_target_up[1d]))' |
	sed 's/.*"value":\[[^,]*,"\([^"]*\)".*/\1/')
oldest=$(curl -fsS "http://127.0.0.1:$KV_PORT/api/v1/query" --data-urlencode 'query=min(time() - min_over_time(timestamp(kvwatch_target_up)[1d:1m]))' |
	sed 's/.*"value":\[[^,]*,"\([^"]*\)".*/\1/')
kill -TERM $kv
wait $kv || true

s0=$(metric_sum "$work/m0.prom" kvwatch_target_scrapes_total %.0f) s1=$(metric_sum "$work/m1.prom" kvwatch_target_scrapes_total %.0f)
m0=$(metric_sum "$work/m0.prom" kvwatch_scrape_deadline_misses_total %.0f) m1=$(metric_sum "$work/m1.prom" kvwatch_scrape_deadline_misses_total %.0f)
up=$(metric_sum "$work/m1.prom" kvwatch_target_up %.0f)
g() { metric_sum "$work/m1.prom" "$1" %.0f; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
bmib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
w=$(secs "$t0" "$t1")
cpu=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" 'BEGIN { printf "%.1f", (b - a) / hz }')
cat <<EOF
endpoints: $N SGLang TP=$TP (page: $page_bytes bytes, $page_samples samples), interval 5 s, --history 24h (1h at 5 s, then 1m)

seed run (${SEED_SECONDS} s of history): VmRSS $(mib "$seed_rss") MiB, peak VmHWM $(mib "$seed_hwm") MiB
generated 24 h snapshot: $(bmib "$snap_bytes") MiB file; $gen

| phase | value |
| --- | --- |
| start to ready (restore + first scrape of all targets) | $(secs "$t_start" "$t_ready") s, $(awk -v c="$ready_cpu" -v hz="$HZ" 'BEGIN { printf "%.1f", c / hz }') CPU-s |
| VmRSS / VmHWM at ready | $(mib "$ready_rss") / $(mib "$ready_hwm") MiB |
| measured window | $w s after a $WARMUP s warm-up |
| VmRSS in the window: min / mean / max | $(mib "$min_rss") / $(awk -v s="$sum_rss" -v n="$n_rss" 'BEGIN { printf "%.0f", s / n / 1024 }') / $(mib "$max_rss") MiB |
| VmRSS / VmHWM at the end | $(mib "$end_rss") / **$(mib "$end_hwm") MiB** |
| CPU in the window | $cpu CPU-s = $(awk -v c="$cpu" -v w="$w" 'BEGIN { printf "%.3f", c / w }') cores |
| scrapes in the window, deadline misses, targets up | $((s1 - s0)), $((m1 - m0)), $up of $N |
| Go heap at the end: alloc / in use / sys (go_memstats_*) | $(bmib "$(g go_memstats_heap_alloc_bytes)") / $(bmib "$(g go_memstats_heap_inuse_bytes)") / $(bmib "$(g go_memstats_sys_bytes)") MiB |
| samples of kvwatch_target_up over 1d (all endpoints) | $held |
| oldest sample of kvwatch_target_up | $oldest s ago |

RSS timeline (seconds since start, VmRSS kB, VmHWM kB), every 5 s:
$(awk 'NR % 6 == 1' "$work/rss.txt")
EOF
