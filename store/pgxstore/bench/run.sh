#!/usr/bin/env bash
# Compares pgxstore's heartbeat Write throughput (BenchmarkWriteHeartbeat:
# one conditional UPDATE per Write, no events, a new deadline) with the
# ceiling pgbench reaches for a one-row UPDATE by primary key on the same
# server, at 1, 8 and 32 concurrent clients, and prints the ratio. The two
# alternate per client count so that both see the same machine load.
#
# Usage: store/pgxstore/bench/run.sh
#   LOBBYHOST_POSTGRES_DSN  server to use (default: local test database)
#   BENCH_SECONDS           seconds per measurement (default 5)
#   BENCH_CLIENTS           client counts (default "1 8 32")
# Needs psql, pgbench and go on PATH. Exits 1 if a ratio is below 50%.
set -euo pipefail

dsn=${LOBBYHOST_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
secs=${BENCH_SECONDS:-5}
clients=${BENCH_CLIENTS:-1 8 32}
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

# The ceiling: as many rows as the Go benchmark has lobbies, updated at
# random by primary key with a prepared statement.
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

printf '%-8s %14s %14s %8s\n' clients pgbench_tps go_writes/s ratio
status=0
for c in $clients; do
	threads=$((c < 2 ? c : 2))
	tps=$(pgbench -n -M prepared -f "$work/update.sql" -c "$c" -j "$threads" -T "$secs" "$dsn" 2>/dev/null |
		awk '/^tps/ {print $3; exit}')
	out=$(cd "$module" && LOBBYHOST_POSTGRES_DSN=$dsn "$work/pgxstore.test" \
		-test.run '^$' -test.bench "^BenchmarkWriteHeartbeat/clients=$c\$" \
		-test.benchtime "${secs}s" -test.benchmem)
	echo "$out" | grep '^Benchmark' >>"$work/go.txt"
	wps=$(echo "$out" | awk '/^Benchmark/ {for (i = 2; i <= NF; i++) if ($i == "writes/s") print $(i-1)}')
	if [[ -z $tps || -z $wps ]]; then
		echo "run.sh: no figure for $c clients (pgbench: '$tps', go: '$wps')" >&2
		exit 2
	fi
	ratio=$(awk -v a="$wps" -v b="$tps" 'BEGIN {printf "%.0f%%", 100 * a / b}')
	printf '%-8s %14.0f %14.0f %8s\n' "$c" "$tps" "$wps" "$ratio"
	if awk -v a="$wps" -v b="$tps" 'BEGIN {exit !(a < b / 2)}'; then
		status=1
	fi
done
echo
cat "$work/go.txt"
if ((status)); then
	echo "below the target: Write throughput under 50% of the pgbench ceiling" >&2
fi
exit $status
