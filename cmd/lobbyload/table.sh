#!/usr/bin/env bash
# table.sh — run `lobbyload -scenario failover` (or burst) against each kind of server
# and print the markdown table of medians for the current tree.
#
#   cmd/lobbyload/table.sh
#
# Builds examples/wsserver, cmd/lobbyload/minserver and lobbyload into OUT,
# then for each kind: starts the server (pinned to CPU 0 with taskset, if
# there is taskset) with -grace $GRACE, runs lobbyload (pinned to CPU 1) with
# -pid of the server, stops the server; RUNS times. Prints the table of
# medians (`lobbyload table`) and leaves every JSON report and the HTML
# report of each kind's last run in OUT.
# Environment (defaults in brackets):
#   KINDS     server kinds ["minimal memory postgres redis"]:
#             minimal  = cmd/lobbyload/minserver (no persistence, a baseline)
#             memory   = wsserver -store memory
#             postgres = wsserver -store postgres, a fresh schema per run
#                        (needs LOBBYHOST_POSTGRES_DSN; skipped without it)
#             redis    = wsserver -store redis, a fresh key prefix per run
#                        (needs LOBBYHOST_REDIS_ADDR; skipped without it)
#   RUNS      runs per kind [3]
#   ROOMS     rooms [2000]
#   PLAYERS   players per room [4]
#   CONCURRENCY  joins in flight [64]
#   CLOSE_CONCURRENCY  host closes in flight [as many as CONCURRENCY; burst:
#             ignored, every host at once]
#   SCENARIO  failover, or burst: every host dropped at once after a barrier,
#             the rooms taking the drop styles in turn [failover]
#   DROPS     lobbyload -drops: comma-separated drop styles (handshake, fin,
#             rst) [unset: handshake,rst; burst: all three]
#   GRACE     the servers' grace, passed to lobbyload too [200ms]
#   HEARTBEAT_TTL  -heartbeat-ttl of wsserver and minserver [unset: their
#             default, 15s, with pings and heartbeats; 0 turns them off]
#   IDLE      lobbyload -idle: hold every socket open this long before the
#             drops and report the server's store calls per second [unset]
#   BASE      a git revision of this repository: also measure the example
#             server built from it, as kinds base-memory, base-postgres and
#             base-redis beside each wsserver kind [unset]
#   OUT       directory for binaries, logs and reports [a new temp dir]
# Runs alternate between kinds (run 1 of every kind, then run 2, ...), so
# that all kinds see the same machine.
set -euo pipefail
# The server signs tickets with a key its processes share; on a shared store
# it needs one. An environment variable, so that older binaries ignore it.
export LOBBYHOST_TICKET_KEYS=${LOBBYHOST_TICKET_KEYS:-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')}
here=$(cd "$(dirname "$0")" && pwd)
tree=$(cd "$here/../.." && pwd)
kinds=${KINDS:-"minimal memory postgres redis"}
runs=${RUNS:-3}
rooms=${ROOMS:-2000}
players=${PLAYERS:-4}
concurrency=${CONCURRENCY:-64}
close_concurrency=${CLOSE_CONCURRENCY:-$concurrency}
grace=${GRACE:-200ms}
scenario=${SCENARIO:-failover}
drops=()
[[ -n ${DROPS:-} ]] && drops=(-drops "$DROPS")
hb=()
[[ -n ${HEARTBEAT_TTL:-} ]] && hb=(-heartbeat-ttl "$HEARTBEAT_TTL")
idle=()
[[ -n ${IDLE:-} ]] && idle=(-idle "$IDLE")
out=${OUT:-$(mktemp -d /tmp/lobbyload-table.XXXXXX)}
mkdir -p "$out"

pin_server=() pin_load=()
if command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
	pin_server=(taskset -c 0) pin_load=(taskset -c 1)
else
	echo "no taskset or fewer than 2 CPUs: server and load generator are not pinned" >&2
fi

echo "building from $tree ($(git -C "$tree" rev-parse --short HEAD 2>/dev/null || echo '?')) into $out" >&2
(cd "$tree/examples/wsserver" && go build -o "$out/wsserver" .)
(cd "$here" && go build -o "$out/minserver" ./minserver && go build -o "$out/lobbyload" .)
if [[ -n ${BASE:-} ]]; then
	echo "building the base, $BASE ($(git -C "$tree" rev-parse --short "$BASE")), into $out" >&2
	rm -rf "$out/base-tree" && mkdir -p "$out/base-tree"
	git -C "$tree" archive "$BASE" | tar -x -C "$out/base-tree"
	(cd "$out/base-tree/examples/wsserver" && go build -o "$out/wsserver-base" .)
	with_base=
	for kind in $kinds; do
		with_base+=" $kind"
		[[ $kind == minimal ]] || with_base+=" base-$kind"
	done
	kinds=$with_base
fi

pid=
stop_server() {
	if [[ -n $pid ]]; then
		kill -INT "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		pid=
	fi
}
trap stop_server EXIT

# server_args KIND TAG prints the command line of a server of that kind.
server_args() {
	if [[ $1 == base-* ]]; then
		server_args "${1#base-}" "$2" | sed "s|^$out/wsserver |$out/wsserver-base |"
		return
	fi
	case $1 in
	minimal) echo "$out/minserver ${hb[*]}" ;;
	memory) echo "$out/wsserver -log-level warn ${hb[*]} -store memory" ;;
	postgres) echo "$out/wsserver -log-level warn ${hb[*]} -store postgres -postgres-dsn $LOBBYHOST_POSTGRES_DSN -postgres-schema $2" ;;
	redis) echo "$out/wsserver -log-level warn ${hb[*]} -store redis -redis-addr $LOBBYHOST_REDIS_ADDR -redis-prefix $2" ;;
	*) echo "unknown kind $1" >&2; return 2 ;;
	esac
}

# cleanup KIND TAG removes what a run stored under TAG.
cleanup() {
	case ${1#base-} in
	postgres) psql "$LOBBYHOST_POSTGRES_DSN" -qc "DROP SCHEMA IF EXISTS \"$2\" CASCADE" >/dev/null 2>&1 ||
		echo "could not drop schema $2" >&2 ;;
	redis)
		local h=${LOBBYHOST_REDIS_ADDR%:*} p=${LOBBYHOST_REDIS_ADDR##*:}
		redis-cli -h "$h" -p "$p" --scan --pattern "{$2*" | xargs -r -n 500 redis-cli -h "$h" -p "$p" del >/dev/null ||
			echo "could not delete keys of $2" >&2 ;;
	esac
}

measured=
for kind in $kinds; do
	case ${kind#base-} in
	postgres) [[ -n ${LOBBYHOST_POSTGRES_DSN:-} ]] || { echo "skipping $kind: LOBBYHOST_POSTGRES_DSN is not set" >&2; continue; } ;;
	redis) [[ -n ${LOBBYHOST_REDIS_ADDR:-} ]] || { echo "skipping $kind: LOBBYHOST_REDIS_ADDR is not set" >&2; continue; } ;;
	esac
	measured+=" $kind"
done
reports=()
for run in $(seq 1 "$runs"); do
	for kind in $measured; do
		tag="lobbyload_table_$$_${kind}_$run"
		log="$out/$kind-$run"
		# shellcheck disable=SC2046 # word splitting of the command line is meant
		"${pin_server[@]}" $(server_args "$kind" "$tag") -addr 127.0.0.1:0 -grace "$grace" >"$log.out" 2>"$log.err" &
		pid=$!
		for _ in $(seq 1 200); do
			grep -q http:// "$log.out" 2>/dev/null && break
			sleep 0.05
		done
		url=$(grep -o 'http://[^/ ]*' "$log.out" | head -1 || true)
		[[ -n $url ]] || { echo "$kind server did not start:" >&2; cat "$log.err" >&2; exit 1; }
		echo "=== $scenario, $kind, run $run of $runs: $url (pid $pid), $rooms rooms × $players players, grace $grace" >&2
		html=()
		[[ $run == "$runs" ]] && html=(-html "$out/$kind.html")
		if "${pin_load[@]}" "$out/lobbyload" -scenario "$scenario" "${drops[@]}" "${idle[@]}" -servers "$url" -rooms "$rooms" -players "$players" \
			-concurrency "$concurrency" -close-concurrency "$close_concurrency" -grace "$grace" -pid "$pid" -label "$kind" -json "$log.json" "${html[@]}" >&2; then
			reports+=("$log.json")
		else
			echo "lobbyload failed on $kind run $run" >&2
		fi
		stop_server
		cleanup "$kind" "$tag"
	done
done
[[ ${#reports[@]} -gt 0 ]] || { echo "no reports" >&2; exit 1; }
echo >&2
"$out/lobbyload" table "${reports[@]}"
echo >&2
echo "reports, HTML and logs: $out" >&2
