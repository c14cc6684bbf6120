#!/usr/bin/env bash
# run.sh measures ladder's governed route_item over MCP against a bare
# go-sdk server and a plain net/http handler, side by side in one run on
# this machine (DESIGN §11), and prints a markdown table.
#
# It builds the binaries into bench/bin, starts the three servers on fixed
# loopback ports (bare go-sdk 18951, plain net/http 18952, `ladder demo`
# 18953 with its database in a temporary folder), waits for them, drives
# each in turn with the load generator (warm-up, then a fixed duration),
# stops every process it started by its pid, and prints the table. Results
# (JSON) and server logs are left in bench/out.
#
# Usage: bench/run.sh            (from anywhere in the repository)
# Knobs: CLIENTS=64 DURATION=12s WARMUP=3s ROUNDS=1 (rounds repeat the three
# measurements in turn, one table per round: this machine's numbers vary
# from run to run).
set -euo pipefail

CLIENTS=${CLIENTS:-64}
DURATION=${DURATION:-12s}
WARMUP=${WARMUP:-3s}
ROUNDS=${ROUNDS:-1}
BARE_ADDR=127.0.0.1:18951
PLAIN_ADDR=127.0.0.1:18952
LADDER_ADDR=127.0.0.1:18953

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=$here/bin
out=$here/out
mkdir -p "$bin" "$out"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ladder-bench-XXXXXX")
pids=()

cleanup() {
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

echo "building…" >&2
(cd "$root" && go build -o "$bin/" ./bench/bareserver ./bench/plainserver ./bench/loadgen ./cmd/ladder)

# wait_port waits up to 60 s for a loopback port to accept connections.
wait_port() {
	local port=${1##*:}
	for _ in $(seq 600); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	echo "run.sh: nothing listening on $1 after 60 s" >&2
	return 1
}

"$bin/bareserver" -addr "$BARE_ADDR" 2>"$out/bareserver.log" &
pids+=($!)
"$bin/plainserver" -addr "$PLAIN_ADDR" 2>"$out/plainserver.log" &
pids+=($!)
"$bin/ladder" demo --addr "$LADDER_ADDR" --db "$tmp/ladder.db" --keys "$tmp/keys.json" >"$out/ladder-demo.out" 2>"$out/ladder-demo.log" &
pids+=($!)
wait_port "$BARE_ADDR"
wait_port "$PLAIN_ADDR"
wait_port "$LADDER_ADDR" # listens only once seeded and the keys file is written

common=(-clients "$CLIENTS" -duration "$DURATION" -warmup "$WARMUP" -json)
echo
echo "$(nproc) cores, $(go version | cut -d' ' -f3-), $CLIENTS clients, $DURATION each after $WARMUP warm-up"
for round in $(seq "$ROUNDS"); do
	echo "round $round: bare go-sdk…" >&2
	"$bin/loadgen" "${common[@]}" -name "bare go-sdk (no-op tool)" -url "http://$BARE_ADDR/mcp" -tool noop >"$out/bare.$round.json"
	echo "round $round: plain net/http…" >&2
	"$bin/loadgen" "${common[@]}" -name "plain net/http (fixed result)" -url "http://$PLAIN_ADDR/mcp" -tool noop >"$out/plain.$round.json"
	echo "round $round: ladder route_item…" >&2
	"$bin/loadgen" "${common[@]}" -name "ladder route_item (auth + decision + durable audit)" -url "http://$LADDER_ADDR/mcp" \
		-demo-keys "$tmp/keys.json" -workspace vantrow-bills -tool route_item \
		-args '{"step":"post_tms","item":"BENCH-{run}-{n}"}' >"$out/ladder.$round.json"
	echo
	echo "Round $round:"
	echo
	"$bin/loadgen" -table "$out/bare.$round.json" "$out/plain.$round.json" "$out/ladder.$round.json"
done
