#!/usr/bin/env bash
# Compares heartbeat throughput with the ceiling pgbench reaches for a
# one-row UPDATE by primary key on the same server, at 1, 8 and 32
# concurrent clients, and prints the ratios:
#   - the store alone: BenchmarkWriteHeartbeat, one conditional UPDATE per
#     Write (no events, a new deadline);
#   - the store batched: BenchmarkWriteBatch with 128 heartbeats per
#     WriteBatch (one pipeline, one transaction) from each client;
#   - the whole path: BenchmarkServiceHeartbeat, lobby.Service.Heartbeat on
#     pgxstore with Run going, each client on lobbies of its own (the
#     Service's cache makes that one UPDATE too), with its p50/p99 latency.
# The four alternate per client count so that all see the same machine
# load. Then the Service again with many callers at once (a server's
# sockets heartbeating), beside the best pgbench figure: with batched
# writes it must pass that ceiling.
#
# Usage: store/pgxstore/bench/run.sh
#   LOBBYHOST_POSTGRES_DSN  server to use (default: local test database)
#   BENCH_SECONDS           seconds per measurement (default 5)
#   BENCH_CLIENTS           client counts (default "1 8 32")
#   BENCH_MANY              callers of the last measurement (default 256)
# Needs psql, pgbench and go on PATH. Exits 1 if a ratio is below 50%, or
# if the many callers do not pass the ceiling.
set -euo pipefail

dsn=${LOBBYHOST_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
secs=${BENCH_SECONDS:-5}
clients=${BENCH_CLIENTS:-1 8 32}
many_clients=${BENCH_MANY:-256}
module=$(cd "$(dirname "$0")/.." && pwd)
table=lobbyhost_bench_ceiling
work=$(mktemp -d)

cleanup() {
	psql "$dsn" -q -c "DROP TABLE IF EXISTS $table" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

for tool in psql pgbench go; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool not found" >&2; exit 2; }
done

# The ceiling: as many rows as BenchmarkWriteHeartbeat has lobbies (the
# Service benchmark keeps 4 per client), updated at random by primary key
# with a prepared statement.
psql "$dsn" -v ON_ERROR_STOP=1 -q <<SQL
SET client_min_messages TO warning;
DROP TABLE IF EXISTS $table;
CREATE TABLE $table (id integer PRIMARY KEY, v bigint NOT NULL);
INSERT INTO $table SELECT g, 0 FROM generate_series(0, 9999) AS g;
VACUUM ANALYZE $table;
SQL
cat >"$work/update.sql" <<SQL
\set id random(0, 9999)
UPDATE $table SET v = v + 1 WHERE id = :id;
SQL

# Build the benchmark binary once, outside the measurements.
(cd "$module" && go test -c -o "$work/pgxstore.test" .)

# metric prints the value before unit in a benchmark result line.
metric() {
	awk -v unit="$1" '/^Benchmark/ {for (i = 2; i <= NF; i++) if ($i == unit) print $(i-1)}'
}
# gobench runs one Go benchmark and keeps its result line.
gobench() {
	local out
	out=$(cd "$module" && LOBBYHOST_POSTGRES_DSN=$dsn "$work/pgxstore.test" \
		-test.run '^$' -test.bench "$1" -test.benchtime "${secs}s" -test.benchmem)
	echo "$out" | grep '^Benchmark' | tee -a "$work/go.txt"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.0f%%", 100 * a / b}'; }
below() { awk -v a="$1" -v b="$2" 'BEGIN {exit !(a < b / 2)}'; }

status=0
rows=()
ceilings=()
for c in $clients; do
	threads=$((c < 2 ? c : 2))
	tps=$(pgbench -n -M prepared -f "$work/update.sql" -c "$c" -j "$threads" -T "$secs" "$dsn" 2>/dev/null |
		awk '/^tps/ {print $3; exit}')
	wps=$(gobench "^BenchmarkWriteHeartbeat/clients=$c\$" | metric writes/s)
	bps=$(gobench "^BenchmarkWriteBatch/heartbeat/clients=$c/size=128\$" | metric writes/s)
	svc=$(gobench "^BenchmarkServiceHeartbeat/clients=$c\$")
	hps=$(echo "$svc" | metric heartbeats/s)
	p50=$(echo "$svc" | metric p50-us)
	p99=$(echo "$svc" | metric p99-us)
	if [[ -z $tps || -z $wps || -z $bps || -z $hps ]]; then
		echo "run.sh: no figure for $c clients (pgbench: '$tps', store: '$wps', batched: '$bps', service: '$hps')" >&2
		exit 2
	fi
	ceilings+=("$tps")
	rows+=("$(printf '%-8s %12.0f %12.0f %6s %12.0f %6s %12.0f %6s %9.0f %9.0f' "$c" "$tps" "$wps" "$(ratio "$wps" "$tps")" \
		"$bps" "$(ratio "$bps" "$tps")" "$hps" "$(ratio "$hps" "$tps")" "$p50" "$p99")")
	if below "$wps" "$tps" || below "$hps" "$tps"; then
		status=1
	fi
done
echo
printf '%-8s %12s %12s %6s %12s %6s %12s %6s %9s %9s\n' clients pgbench_tps store_w/s ratio batch128_w/s ratio service_hb/s ratio p50_us p99_us
printf '%s\n' "${rows[@]}"
# Many callers at once: the heartbeats of a server's sockets. pgbench
# cannot follow there (a client is a connection, and PostgreSQL allows few),
# so they are set beside the best pgbench figure above: a Service that
# batches its writes must pass that ceiling.
ceiling=$(printf '%s\n' "${ceilings[@]}" | sort -g | tail -1)
many=$(gobench "^BenchmarkServiceHeartbeat/clients=$many_clients\$")
mhps=$(echo "$many" | metric heartbeats/s)
[[ -n $mhps ]] || { echo "run.sh: no figure for $many_clients Service clients" >&2; exit 2; }
echo
printf '%-8s %12s %12s %6s %9s %9s\n' clients ceiling_tps service_hb/s ratio p50_us p99_us
printf '%-8s %12.0f %12.0f %6s %9.0f %9.0f\n' "$many_clients" "$ceiling" "$mhps" "$(ratio "$mhps" "$ceiling")" \
	"$(echo "$many" | metric p50-us)" "$(echo "$many" | metric p99-us)"
if awk -v a="$mhps" -v b="$ceiling" 'BEGIN {exit !(a <= b)}'; then
	echo "below the target: $many_clients Service heartbeat callers do not pass the pgbench ceiling" >&2
	status=1
fi
echo
cat "$work/go.txt"
if ((status)); then
	echo "below the target: heartbeat throughput under 50% of the pgbench ceiling" >&2
fi
exit $status
