#!/usr/bin/env bash
# Sets lobbyhost's throughput on Redis beside what redis-benchmark gets from
# the same server in the same run: EVALSHA of a trivial script ("return 1"),
# the cheapest possible script round trip, at 1, 8 and 32 concurrent
# clients, and prints each figure as a ratio of it (the target is >= 50%):
#
#   store heartbeat     BenchmarkWrite/heartbeat: Store.Write of a record
#                       whose deadline moves, no log entry
#   store 1 event       BenchmarkWrite/events: the same plus one 256-byte
#                       log entry
#   service heartbeat   BenchmarkServiceHeartbeat: lobby.Service.Heartbeat
#                       with Run going, each client on lobbies of its own
#                       (one EVALSHA each), with p50/p99 latency
#   service transition  BenchmarkServiceTransition: a disconnect or the
#                       rejoin after it, one log entry each, while Run
#                       reads the log
#
# Last, the contended case: 8 clients on one lobby through two Services
# (two processes' worth), set beside redis-benchmark's 8-client figure.
#
# For each client count the measurements run back to back, so that they see
# the same machine load. On a busy machine the figures wander, the
# one-client ones most: ROUNDS=3 repeats every measurement three times,
# alternating, and keeps the median of each.
#
# Usage: store/redisstore/bench/run.sh
# Environment:
#   LOBBYHOST_REDIS_ADDR  host:port of the server (default 127.0.0.1:6379)
#   REQUESTS              redis-benchmark requests per measurement (default 200000)
#   BENCHTIME             go test -benchtime (default 3s)
#   ROUNDS                measurements of each figure, median kept (default 1)
#   STRICT=1              exit 1 if a ratio is below 50%
#   POOLED=1              also measure the Service on a rueidis client without
#                         auto-pipelining (BenchmarkServicePooled), a table of its own
# Needs redis-cli, redis-benchmark and go on PATH.
set -euo pipefail

addr=${LOBBYHOST_REDIS_ADDR:-127.0.0.1:6379}
host=${addr%:*}
port=${addr##*:}
requests=${REQUESTS:-200000}
benchtime=${BENCHTIME:-3s}
rounds=${ROUNDS:-1}
here=$(cd "$(dirname "$0")/.." && pwd)

for tool in redis-cli redis-benchmark go; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool not found" >&2; exit 2; }
done

sha=$(redis-cli -h "$host" -p "$port" SCRIPT LOAD "return 1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Build the benchmark binary once, outside the measurements.
(cd "$here" && go test -c -o "$tmp/redisstore.test" .)
touch "$tmp/go.txt"

# rps prints redis-benchmark's requests per second for c clients.
rps() {
	redis-benchmark -h "$host" -p "$port" -c "$1" -n "$requests" --csv EVALSHA "$sha" 0 2>/dev/null |
		awk -F'"' 'NR == 2 { print $4 }'
}

# gobench runs one Go benchmark, keeps its result line in go.txt and
# prints it.
gobench() {
	LOBBYHOST_REDIS_ADDR=$addr "$tmp/redisstore.test" -test.run '^$' \
		-test.bench "^$1\$" -test.benchtime "$benchtime" -test.benchmem |
		grep '^Benchmark' | tee -a "$tmp/go.txt"
}

# metric prints the value before a unit in benchmark result lines.
metric() {
	awk -v unit="$1" '{ for (i = 2; i <= NF; i++) if ($i == unit) print $(i-1) }'
}

# median prints the median of its arguments.
median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * a / b }'; }

below=()
# check notes a ratio under 50%.
check() {
	if awk -v a="$2" -v b="$3" 'BEGIN { exit !(a < b / 2) }'; then
		below+=("$1")
	fi
}

# need fails the run when a measurement produced no figure.
need() {
	local v
	for v in "$@"; do
		if [[ -z $v ]]; then
			echo "run.sh: a measurement produced no figure; benchmark output so far:" >&2
			cat "$tmp/go.txt" >&2
			exit 2
		fi
	done
}

echo "server $addr, $(redis-cli -h "$host" -p "$port" INFO server | tr -d '\r' | grep '^redis_version:')"
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start, median of $rounds round(s)"

store_rows=() svc_rows=() pooled_rows=()
declare -A base
for c in 1 8 32; do
	bases=() hbs=() evs=() shs=() sh50=() sh99=() sts=() st50=() st99=()
	for _ in $(seq "$rounds"); do
		bases+=("$(rps "$c")")
		hbs+=("$(gobench "BenchmarkWrite/heartbeat/clients=$c" | metric writes/s)")
		evs+=("$(gobench "BenchmarkWrite/events/clients=$c" | metric writes/s)")
		line=$(gobench "BenchmarkServiceHeartbeat/clients=$c")
		shs+=("$(echo "$line" | metric heartbeats/s)")
		sh50+=("$(echo "$line" | metric p50-us)")
		sh99+=("$(echo "$line" | metric p99-us)")
		line=$(gobench "BenchmarkServiceTransition/clients=$c")
		sts+=("$(echo "$line" | metric transitions/s)")
		st50+=("$(echo "$line" | metric p50-us)")
		st99+=("$(echo "$line" | metric p99-us)")
	done
	need "${bases[@]}" "${hbs[@]}" "${evs[@]}" "${shs[@]}" "${sts[@]}"
	b=$(median "${bases[@]}")
	base[$c]=$b
	hb=$(median "${hbs[@]}") ev=$(median "${evs[@]}")
	sh=$(median "${shs[@]}") st=$(median "${sts[@]}")
	store_rows+=("$(printf '%-8s %12.0f %12.0f %6s %12.0f %6s' "$c" "$b" "$hb" "$(ratio "$hb" "$b")" "$ev" "$(ratio "$ev" "$b")")")
	svc_rows+=("$(printf '%-8s %12.0f %12.0f %6s %7.0f %7.0f %12.0f %6s %7.0f %7.0f' "$c" "$b" \
		"$sh" "$(ratio "$sh" "$b")" "$(median "${sh50[@]}")" "$(median "${sh99[@]}")" \
		"$st" "$(ratio "$st" "$b")" "$(median "${st50[@]}")" "$(median "${st99[@]}")")")
	if [[ ${POOLED:-0} == 1 ]]; then
		line=$(gobench "BenchmarkServicePooled/heartbeat/clients=$c")
		ph=$(echo "$line" | metric heartbeats/s)
		ph_lat="$(echo "$line" | metric p50-us) $(echo "$line" | metric p99-us)"
		line=$(gobench "BenchmarkServicePooled/transition/clients=$c")
		pt=$(echo "$line" | metric transitions/s)
		pt_lat="$(echo "$line" | metric p50-us) $(echo "$line" | metric p99-us)"
		need "$ph" "$pt"
		# shellcheck disable=SC2086 # the latencies split into two arguments each
		pooled_rows+=("$(printf '%-8s %12.0f %12.0f %6s %7.0f %7.0f %12.0f %6s %7.0f %7.0f' "$c" "$b" \
			"$ph" "$(ratio "$ph" "$b")" $ph_lat "$pt" "$(ratio "$pt" "$b")" $pt_lat)")
	fi
	check "store heartbeat, $c clients" "$hb" "$b"
	check "store 1 event, $c clients" "$ev" "$b"
	check "service heartbeat, $c clients" "$sh" "$b"
	check "service transition, $c clients" "$st" "$b"
done

# The contended case: one lobby, 8 clients, two Services.
ch=$(gobench "BenchmarkServiceHeartbeat/contended")
ct=$(gobench "BenchmarkServiceTransition/contended")
need "$(echo "$ch" | metric heartbeats/s)" "$(echo "$ct" | metric transitions/s)"

echo
echo "Store.Write (writes/s) against EVALSHA return 1 (requests/s):"
printf '%-8s %12s %12s %6s %12s %6s\n' clients "EVALSHA" "heartbeat" ratio "1 event" ratio
printf '%s\n' "${store_rows[@]}"
echo
echo "lobby.Service with Run going (operations/s, latency in microseconds):"
printf '%-8s %12s %12s %6s %7s %7s %12s %6s %7s %7s\n' clients "EVALSHA" "heartbeat" ratio p50 p99 "transition" ratio p50 p99
printf '%s\n' "${svc_rows[@]}"
ch_v=$(echo "$ch" | metric heartbeats/s) ct_v=$(echo "$ct" | metric transitions/s)
printf '%-8s %12.0f %12.0f %6s %7.0f %7.0f %12.0f %6s %7.0f %7.0f\n' contended "${base[8]}" \
	"$ch_v" "$(ratio "$ch_v" "${base[8]}")" "$(echo "$ch" | metric p50-us)" "$(echo "$ch" | metric p99-us)" \
	"$ct_v" "$(ratio "$ct_v" "${base[8]}")" "$(echo "$ct" | metric p50-us)" "$(echo "$ct" | metric p99-us)"
echo "(contended: 8 clients on one lobby through two Services, set beside 8-client EVALSHA;"
echo " compare-and-set retries per operation: heartbeat $(echo "$ch" | metric retries/op), transition $(echo "$ct" | metric retries/op))"
if ((${#pooled_rows[@]})); then
	echo
	echo "lobby.Service on a client with DisableAutoPipelining (measured once per client count, after its rounds):"
	printf '%-8s %12s %12s %6s %7s %7s %12s %6s %7s %7s\n' clients "EVALSHA" "heartbeat" ratio p50 p99 "transition" ratio p50 p99
	printf '%s\n' "${pooled_rows[@]}"
fi
echo
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; Go benchmark lines:"
cat "$tmp/go.txt"
if ((${#below[@]})); then
	echo
	echo "below the 50% target: $(IFS=';'; echo "${below[*]}")" | sed 's/;/; /g'
	[[ ${STRICT:-0} == 1 ]] && exit 1
fi
exit 0
