#!/usr/bin/env bash
# fanout.sh — start server processes of examples/wsserver on one shared store
# and run `lobbyload -scenario fanout` against them, once per store.
#
#   cmd/lobbyload/fanout.sh [TREE]
#
# TREE is the repository work tree whose examples/wsserver is built (default:
# the one holding this script), e.g. a worktree of main for a baseline.
# Environment (defaults in brackets):
#   STORES    stores to run ["postgres redis memory"]; memory runs ONE process
#             (a memory store cannot be shared)
#   PROCS     processes per shared store [3]
#   ROOMS     rooms per process [1000]
#   RATE      visible changes per second, overall [1000]
#   DURATION  churn duration [20s]
#   HOME_ONLY 1: watch each room on its home process only [0]
#   LOBBYHOST_POSTGRES_DSN [postgres://postgres@127.0.0.1:5432/test?sslmode=disable]
#   LOBBYHOST_REDIS_ADDR   [127.0.0.1:6379]
#   DRAIN     how long to wait for the last deliveries [30s]
#   OUT       directory for binaries, logs and JSON reports [a new temp dir]
# The servers run with -heartbeat-ttl 0, so the only lobby writes are the
# tool's changes (and setup joins), and store reads per change are not
# diluted by heartbeats.
set -euo pipefail
# The server signs tickets with a key its processes share; on a shared store
# it needs one. An environment variable, so that older binaries ignore it.
export LOBBYHOST_TICKET_KEYS=${LOBBYHOST_TICKET_KEYS:-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')}
here=$(cd "$(dirname "$0")" && pwd)
tree=$(cd "${1:-$here/../..}" && pwd)
stores=${STORES:-"postgres redis memory"}
procs=${PROCS:-3}
rooms=${ROOMS:-1000}
rate=${RATE:-1000}
duration=${DURATION:-20s}
dsn=${LOBBYHOST_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
redis=${LOBBYHOST_REDIS_ADDR:-127.0.0.1:6379}
out=${OUT:-$(mktemp -d /tmp/lobbyload.XXXXXX)}
mkdir -p "$out"
home_only=()
[[ ${HOME_ONLY:-0} == 1 ]] && home_only=(-home-only)

echo "building the server from $tree ($(git -C "$tree" rev-parse --short HEAD 2>/dev/null || echo '?'))"
(cd "$tree/examples/wsserver" && go build -o "$out/wsserver" .)
(cd "$here" && go build -o "$out/lobbyload" .)

pids=()
stop_servers() {
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
trap stop_servers EXIT

for store in $stores; do
	tag="lobbyload_$$_$RANDOM"
	n=$procs
	case $store in
	postgres) args=(-store postgres -postgres-dsn "$dsn" -postgres-schema "$tag") ;;
	redis) args=(-store redis -redis-addr "$redis" -redis-prefix "$tag") ;;
	memory) args=(-store memory); n=1 ;;
	*) echo "unknown store $store" >&2; exit 2 ;;
	esac
	servers=()
	for i in $(seq 1 "$n"); do
		"$out/wsserver" -addr 127.0.0.1:0 -log-level warn -heartbeat-ttl 0 -max-members 64 "${args[@]}" \
			>"$out/$store-$i.out" 2>"$out/$store-$i.err" &
		pids+=($!)
		for _ in $(seq 1 200); do
			grep -q http:// "$out/$store-$i.out" 2>/dev/null && break
			sleep 0.05
		done
		url=$(grep -o 'http://[^/ ]*' "$out/$store-$i.out" | head -1)
		[[ -n $url ]] || { echo "server $i on $store did not start:"; cat "$out/$store-$i.err"; exit 1; }
		servers+=("$url")
		# Migrations: let the first process create the schema before the others start.
		[[ $i == 1 ]] && sleep 0.5
	done
	list=$(IFS=,; echo "${servers[*]}")
	echo
	echo "=== $store: $n process(es) $list; $rooms rooms each; $rate changes/s for $duration"
	"$out/lobbyload" -servers "$list" -rooms "$rooms" -rate "$rate" -duration "$duration" -drain "${DRAIN:-30s}" "${home_only[@]}" \
		-json "$out/$store.json" || echo "lobbyload failed on $store"
	stop_servers
	case $store in
	postgres) psql "$dsn" -qc "DROP SCHEMA IF EXISTS \"$tag\" CASCADE" >/dev/null ;;
	redis) redis-cli -h "${redis%:*}" -p "${redis##*:}" --scan --pattern "*$tag*" | xargs -r -n 500 redis-cli -h "${redis%:*}" -p "${redis##*:}" del >/dev/null ;;
	esac
done
echo
echo "reports and logs: $out"
