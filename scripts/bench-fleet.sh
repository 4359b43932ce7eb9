#!/usr/bin/env bash
# bench-fleet.sh: cost of the fleet path: N simulated SGLang TP=8 endpoints,
# two `kvwatch serve --shard i/2` (no history) scraping them every 5 s and
# pushing with remote write into one victoria-metrics.
#
#   scripts/bench-fleet.sh [N=1000] [SECONDS=120]
#
# Needs: go, curl, and the VictoriaMetrics binaries of
# tools/victoriametrics/build.sh (built if missing). Prints a Markdown table
# for docs/benchmarks.md. Everything listens on 127.0.0.1 only; every process
# it starts is stopped on exit.
set -euo pipefail
N=${1:-1000}
DUR=${2:-120}
WARMUP=${WARMUP:-20}
BASE=${BASE_PORT:-20000}
KV_PORT=${KV_PORT:-19477}
VM_PORT=${VM_PORT:-18428}
HZ=$(getconf CLK_TCK)
. "$(dirname "$0")/bench-lib.sh"

cpu_of() { # cpu_of PID: user+system CPU seconds so far
	awk -v hz="$HZ" '{ print ($14 + $15) / hz }' "/proc/$1/stat"
}

vmbin="$(bash tools/victoriametrics/build.sh)"
go build -o "$work/kvwatch" ./cmd/kvwatch

start_simulator 8
sim=${pids[0]}

"$vmbin/victoria-metrics" -storageDataPath="$work/vm" -httpListenAddr="127.0.0.1:$VM_PORT" -loggerLevel=WARN >"$work/vm.log" 2>&1 &
vm=$!
pids+=($vm)
wait_http "http://127.0.0.1:$VM_PORT/health"

kv=()
for i in 0 1; do
	"$work/kvwatch" serve --config.file "$work/kvwatch.yml" --web.listen-address "127.0.0.1:$((KV_PORT + i))" \
		--history 0 --shard "$i/2" --remote-write.url "http://127.0.0.1:$VM_PORT/api/v1/write" \
		--remote-write.instance "shard-$i" --log.level warn 2>"$work/serve-$i.err" &
	kv+=($!)
	pids+=($!)
done
for i in 0 1; do wait_http "http://127.0.0.1:$((KV_PORT + i))/-/ready"; done
sleep "$WARMUP"

snap() { # snap SUFFIX: /metrics of both serves and the store
	for i in 0 1; do curl -fsS "http://127.0.0.1:$((KV_PORT + i))/metrics" >"$work/kv$i.$1"; done
	curl -fsS "http://127.0.0.1:$VM_PORT/metrics" >"$work/vm.$1"
}
t0=$(date +%s.%N)
snap 0
sim0=$(cpu_of "$sim")
sleep "$DUR"
snap 1
sim1=$(cpu_of "$sim")
t1=$(date +%s.%N)

sum2() { # sum2 NAME SUFFIX: metric summed over both serves
	echo "$(metric_sum "$work/kv0.$2" "$1") $(metric_sum "$work/kv1.$2" "$1")" | awk '{ print $1 + $2 }'
}
delta() { echo "$(sum2 "$1" 1) $(sum2 "$1" 0)" | awk '{ print $1 - $2 }'; }
kc=$(delta process_cpu_seconds_total)
scrapes=$(delta kvwatch_target_scrapes_total)
misses=$(delta kvwatch_scrape_deadline_misses_total)
sent=$(delta kvwatch_remote_write_samples_sent_total)
bytes=$(delta kvwatch_remote_write_sent_bytes_total)
lost=$(echo "$(delta kvwatch_remote_write_samples_dropped_total) $(delta kvwatch_remote_write_samples_failed_total)" | awk '{ print $1 + $2 }')
targets0=$(metric_sum "$work/kv0.1" kvwatch_targets %d)
targets1=$(metric_sum "$work/kv1.1" kvwatch_targets %d)
up=$(sum2 kvwatch_target_up 1)
vc=$(echo "$(metric_sum "$work/vm.1" process_cpu_seconds_total) $(metric_sum "$work/vm.0" process_cpu_seconds_total)" | awk '{ print $1 - $2 }')
rows0=$(grep '^vm_rows_inserted_total{type="promremotewrite"}' "$work/vm.0" | awk '{ print $2 }')
rows1=$(grep '^vm_rows_inserted_total{type="promremotewrite"}' "$work/vm.1" | awk '{ print $2 }')
series=$(curl -fsS "http://127.0.0.1:$VM_PORT/api/v1/series/count" | sed 's/.*"data":\[\([0-9]*\)\].*/\1/')
rss() { awk '/VmHWM/ { print int($2 / 1024) }' "/proc/$1/status"; }

awk -v n="$N" -v w="$(awk -v a="$t1" -v b="$t0" 'BEGIN { print a - b }')" -v kc="$kc" -v sc="$scrapes" -v mi="$misses" \
	-v sent="$sent" -v by="$bytes" -v lost="$lost" -v t0="$targets0" -v t1="$targets1" -v up="$up" -v vc="$vc" \
	-v r0="$rows0" -v r1="$rows1" -v se="$series" -v simc="$(awk -v a="$sim1" -v b="$sim0" 'BEGIN { print a - b }')" \
	-v rk0="$(rss "${kv[0]}")" -v rk1="$(rss "${kv[1]}")" -v rv="$(rss "$vm")" -v rs="$(rss "$sim")" \
	-v pb="$page_bytes" -v ps="$page_samples" -v warm="$WARMUP" 'BEGIN {
	rows = r1 - r0
	printf "endpoints: %d SGLang TP=8 (page: %d bytes, %d samples) over 2 shards (%d + %d targets, %d up), interval 5 s, measured over %.0f s after a %d s warm-up\n\n", n, pb, ps, t0, t1, up, w, warm
	printf "| process | CPU-seconds | average cores | peak RSS | what |\n| --- | --- | --- | --- | --- |\n"
	printf "| 2 × kvwatch serve | %.1f | %.3f | %d + %d MiB | %d scrapes, %d deadline misses; %d samples pushed, %d dropped or failed |\n", kc, kc / w, rk0, rk1, sc, mi, sent, lost
	printf "| victoria-metrics | %.1f | %.3f | %d MiB | %d rows ingested (%.0f/s), %d series |\n", vc, vc / w, rv, rows, rows / w, se
	printf "| simulator | %.1f | %.3f | %d MiB | serves the %d pages |\n", simc, simc / w, rs, n
	printf "\nserve: %.3f CPU-ms per endpoint-scrape incl. remote write, %.4f cores per endpoint at 5 s\n", kc / sc * 1000, kc / w / n
	printf "remote write: %.0f samples/s, %.2f bytes per sample (protobuf + snappy, as sent and as queued)\n", sent / w, by / sent
	printf "store: %.3f CPU-ms per 1,000 samples ingested\n", vc / rows * 1e6
}'
