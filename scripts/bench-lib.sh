# bench-lib.sh: what the serve benchmarks share. Source it after setting
# N (endpoints) and BASE (first port); it sets $work and $pids and stops
# every process in $pids on exit. Everything listens on 127.0.0.1 only.
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

wait_http() { # wait_http URL: wait until it answers 200
	for _ in $(seq 1 900); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
		sleep 1
	done
	echo "timed out waiting for $1" >&2
	return 1
}

metric_sum() { # metric_sum FILE NAME [FORMAT]: sum of a metric's series in a /metrics snapshot
	awk -v m="$2" -v f="${3:-%.3f}" '$1 == m || index($1, m "{") == 1 { s += $NF } END { printf f "\n", s }' "$1"
}

start_simulator() { # start_simulator TP: N SGLang servers from port BASE; writes targets.json and kvwatch.yml in $work
	# SIM_PROCS=K splits the N servers over K simulator processes (their
	# pids in $sims; $sim is the first), so one process's load model and
	# HTTP serving do not bound the run.
	local k=${SIM_PROCS:-1} i from n
	sims=()
	for i in $(seq 0 $((k - 1))); do
		from=$((i * N / k))
		n=$(((i + 1) * N / k - from))
		"$work/kvwatch" simulate --servers "$n" --engine sglang --tp "$1" --base-port $((BASE + from)) >"$work/sim$i.out" 2>"$work/sim$i.err" &
		sims+=($!)
		pids+=($!)
	done
	sim=${sims[0]}
	for _ in $(seq 1 300); do
		[ "$(cat "$work"/sim*.out | wc -l)" -ge "$N" ] && break
		for p in "${sims[@]}"; do kill -0 "$p" 2>/dev/null || break 2; done
		sleep 1
	done
	[ "$(cat "$work"/sim*.out | wc -l)" -ge "$N" ] || { echo "simulator did not start:" >&2; cat "$work"/sim*.err >&2; exit 1; }
	page_bytes=$(curl -fsS "http://127.0.0.1:$BASE/metrics" | wc -c)
	page_samples=$(curl -fsS "http://127.0.0.1:$BASE/metrics" | grep -vc '^#')
	{
		printf '[{"labels": {"engine": "sglang"}, "targets": ['
		for i in $(seq 0 $((N - 1))); do
			[ "$i" -gt 0 ] && printf ','
			printf '"127.0.0.1:%d"' $((BASE + i))
		done
		printf ']}]\n'
	} >"$work/targets.json"
	cat >"$work/kvwatch.yml" <<YAML
global:
  scrape_interval: ${INTERVAL:-5}s
  scrape_timeout: 4s
file_sd_configs:
  - files: [targets.json]
YAML
}
