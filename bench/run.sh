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
# Each round has two tables. The first is closed loop: every client sends
# its next call when the last is answered, so it measures each server at
# saturation (calls/s, and the latency at that load). The second is open
# loop at RATE_FACTOR (0.8) times the bare go-sdk server's calls/s of the
# round — the throughput the budget asks ladder to carry — for the bare
# server and ladder alike, latency measured from each call's due time.
#
# Usage: bench/run.sh            (from anywhere in the repository)
# Knobs: CLIENTS=64 DURATION=12s WARMUP=3s ROUNDS=1 (rounds repeat the
# measurements in turn, one pair of tables per round: this machine's numbers
# vary from run to run); PROTOCOL=2025-06-18 (MCP-Protocol-Version the
# clients speak; 2026-07-28 adds its _meta and Mcp-* headers);
# RATE_FACTOR=0.8 (0 skips the open-loop table).
#
# A third table per round is the capability budget: ticket6:readLedger
# called straight on the demo's stand-in ledger (a go-sdk MCP server) and
# the same call through ladder's capability tool (auth, scope check, lane,
# durable call record, then the upstream call over ladder's reused
# session), both closed loop; ladder must reach 0.7× the direct calls/s.
# CAPABILITY=0 skips it. Each round ends with the demo's resident memory,
# now and at its peak since it began serving (DESIGN §11 budgets it).
set -euo pipefail

CLIENTS=${CLIENTS:-64}
DURATION=${DURATION:-12s}
WARMUP=${WARMUP:-3s}
ROUNDS=${ROUNDS:-1}
PROTOCOL=${PROTOCOL:-2025-06-18}
RATE_FACTOR=${RATE_FACTOR:-0.8}
CAPABILITY=${CAPABILITY:-1}
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
demo_pid=$!
wait_port "$BARE_ADDR"
wait_port "$PLAIN_ADDR"
# The demo holds its port from the start (the kernel accepts connections
# into the backlog while it seeds), so an open port is not a ready demo:
# it writes the keys file once it serves, and that is what we wait for.
wait_port "$LADDER_ADDR"
for _ in $(seq 3000); do [ -s "$tmp/keys.json" ] && break; sleep 0.1; done
[ -s "$tmp/keys.json" ] || { echo "run.sh: the demo wrote no keys file after 5 minutes (see $out/ladder-demo.log)" >&2; exit 1; }
# Seeding the 14 weeks peaks higher than serving does: reset the kernel's
# peak-RSS mark (clear_refs 5) so the peak printed below is the serving one.
echo 5 >"/proc/$demo_pid/clear_refs" 2>/dev/null || echo "run.sh: cannot reset the demo's peak RSS; the peak printed includes its seeding" >&2

common=(-clients "$CLIENTS" -duration "$DURATION" -warmup "$WARMUP" -protocol-version "$PROTOCOL" -json)
# The stand-in ledger's address, from the demo's log line.
upstream=$(grep -m1 '"msg":"demo upstream listening"' "$out/ladder-demo.log" | sed -n 's/.*"url":"\([^"]*\)".*/\1/p' || true)
if [ -z "$upstream" ]; then
	echo "run.sh: no 'demo upstream listening' line in $out/ladder-demo.log" >&2
	exit 1
fi
scope='"program":"partner-2027","relationship":"relationship:partner-2027:creator-1"'
ladder_args=(-url "http://$LADDER_ADDR/mcp" -demo-keys "$tmp/keys.json" -workspace vantrow-bills -tool route_item
	-args '{"step":"post_tms","item":"BENCH-{run}-{n}"}')
echo
echo "$(nproc) cores, $(go version | cut -d' ' -f3-), $CLIENTS clients, $DURATION each after $WARMUP warm-up, protocol $PROTOCOL"
for round in $(seq "$ROUNDS"); do
	echo "round $round: bare go-sdk…" >&2
	"$bin/loadgen" "${common[@]}" -name "bare go-sdk (no-op tool)" -url "http://$BARE_ADDR/mcp" -tool noop >"$out/bare.$round.json"
	echo "round $round: plain net/http…" >&2
	"$bin/loadgen" "${common[@]}" -name "plain net/http (fixed result)" -url "http://$PLAIN_ADDR/mcp" -tool noop >"$out/plain.$round.json"
	echo "round $round: ladder route_item…" >&2
	"$bin/loadgen" "${common[@]}" -name "ladder route_item (auth + decision + durable audit)" "${ladder_args[@]}" >"$out/ladder.$round.json"
	echo
	echo "Round $round, closed loop (each server at saturation):"
	echo
	"$bin/loadgen" -table "$out/bare.$round.json" "$out/plain.$round.json" "$out/ladder.$round.json"
	if [ "$RATE_FACTOR" != "0" ]; then
		echo "round $round: open loop at $RATE_FACTOR × bare go-sdk…" >&2
		rate=(-rate-from "$out/bare.$round.json" -rate-factor "$RATE_FACTOR")
		"$bin/loadgen" "${common[@]}" "${rate[@]}" -name "bare go-sdk (no-op tool)" -url "http://$BARE_ADDR/mcp" -tool noop >"$out/bare-open.$round.json"
		"$bin/loadgen" "${common[@]}" "${rate[@]}" -name "ladder route_item" "${ladder_args[@]}" >"$out/ladder-open.$round.json"
		echo
		echo "Round $round, open loop at $RATE_FACTOR × the bare go-sdk server's calls/s above:"
		echo
		"$bin/loadgen" -table "$out/bare-open.$round.json" "$out/ladder-open.$round.json"
	fi
	if [ "$CAPABILITY" != "0" ]; then
		echo "round $round: capability readLedger, direct and through ladder…" >&2
		"$bin/loadgen" "${common[@]}" -name "readLedger straight to the stand-in ledger (go-sdk)" -url "$upstream/ledger/mcp" \
			-tool readLedger -args "{$scope}" >"$out/upstream.$round.json"
		"$bin/loadgen" "${common[@]}" -name "ticket6:readLedger through ladder" -url "http://$LADDER_ADDR/mcp" \
			-demo-keys "$tmp/keys.json" -workspace partner-programs -tool ticket6:readLedger \
			-args "{$scope,\"payload\":{}}" >"$out/capability.$round.json"
		echo
		echo "Round $round, a capability call proxied to an upstream MCP tool (budget: 0.7× direct):"
		echo
		"$bin/loadgen" -table "$out/upstream.$round.json" "$out/capability.$round.json"
	fi
	# The demo's memory (DESIGN.md §11 budgets its RSS under this load): its
	# resident set now and its peak since it started, from the kernel.
	if [ -r "/proc/$demo_pid/status" ]; then
		echo
		awk '/^VmRSS/ {rss=$2} /^VmHWM/ {hwm=$2} END {printf "ladder demo resident: %.1f MiB now, %.1f MiB at its peak since it began serving\n", rss/1024, hwm/1024}' "/proc/$demo_pid/status"
	fi
done
