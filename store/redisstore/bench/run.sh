#!/usr/bin/env bash
# Compares redisstore's write throughput with what redis-benchmark gets from
# the same server in the same run: EVALSHA of a trivial script ("return 1"),
# the cheapest possible script round trip, at 1, 8 and 32 concurrent clients.
# For each client count it runs redis-benchmark and then the Go benchmarks
# back to back, so that both see the same machine load, and prints the ratio
# (store writes/s over redis-benchmark requests/s; the target is >= 50%).
# On a busy machine the figures wander, the one-client ones most: ROUNDS=3
# alternates the measurements three times and keeps the median of each.
#
# Usage: store/redisstore/bench/run.sh
# Environment:
#   LOBBYHOST_REDIS_ADDR  host:port of the server (default 127.0.0.1:6379)
#   REQUESTS              redis-benchmark requests per client count (default 200000)
#   BENCHTIME             go test -benchtime (default 3s)
#   ROUNDS                measurements of each figure, median kept (default 1)
#   STRICT=1              exit 1 if a ratio is below 50%
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
(cd "$here" && go test -c -o "$tmp/redisstore.test" .)

# rps prints redis-benchmark's requests per second for c clients.
rps() {
	redis-benchmark -h "$host" -p "$port" -c "$1" -n "$requests" --csv EVALSHA "$sha" 0 2>/dev/null |
		awk -F'"' 'NR == 2 { print $4 }'
}

# writes prints the Go benchmark's writes/s for a kind and c clients.
writes() {
	LOBBYHOST_REDIS_ADDR=$addr "$tmp/redisstore.test" -test.run '^$' \
		-test.bench "^BenchmarkWrite/$1/clients=$2\$" -test.benchtime "$benchtime" |
		tee -a "$tmp/go.txt" |
		awk '/writes\/s/ { for (i = 1; i <= NF; i++) if ($i == "writes/s") print $(i-1) }'
}

# median prints the median of its arguments.
median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

echo "server $addr, $(redis-cli -h "$host" -p "$port" INFO server | tr -d '\r' | grep '^redis_version:')"
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), median of $rounds round(s)"
echo
printf '%-8s %18s %16s %7s %16s %7s\n' clients "EVALSHA return 1" "heartbeat" ratio "with 1 event" ratio
below=0
for c in 1 8 32; do
	bases=() hbs=() evs=()
	for _ in $(seq "$rounds"); do
		bases+=("$(rps "$c")")
		hbs+=("$(writes heartbeat "$c")")
		evs+=("$(writes events "$c")")
	done
	base=$(median "${bases[@]}")
	hb=$(median "${hbs[@]}")
	ev=$(median "${evs[@]}")
	r1=$(awk -v a="$hb" -v b="$base" 'BEGIN { printf "%.0f%%", 100 * a / b }')
	r2=$(awk -v a="$ev" -v b="$base" 'BEGIN { printf "%.0f%%", 100 * a / b }')
	printf '%-8s %14.0f r/s %12.0f w/s %7s %12.0f w/s %7s\n' "$c" "$base" "$hb" "$r1" "$ev" "$r2"
	for r in "$r1" "$r2"; do
		[ "${r%\%}" -ge 50 ] || below=1
	done
done
echo
echo "Go benchmark lines:"
grep '^Benchmark' "$tmp/go.txt"
if [ "$below" = 1 ]; then
	echo "some ratio is below the 50% target"
	[ "${STRICT:-0}" = 1 ] && exit 1
fi
exit 0
