#!/usr/bin/env bash
# run.sh measures ladder's governed route_item over MCP against a bare
# go-sdk server and a plain net/http handler, side by side in one run on
# this machine (DESIGN §11), and prints a markdown table.
#
# It builds the binaries into bench/bin, starts the three servers on
# loopback ports (by default bare go-sdk 18951, plain net/http 18952,
# `ladder demo` 18953 with its database, keys, gateway and env files in a
# temporary folder; the demo's stand-in systems listen on a port the kernel
# picks, read from the demo's log), waits for them, drives each in turn
# with the load generator (warm-up, then a fixed duration), stops every
# process it started by its pid, and prints the table. Results (JSON) and
# server logs are left in bench/out.
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
# RATE_FACTOR=0.8 (0 skips the open-loop table); BARE_ADDR=127.0.0.1:18951,
# PLAIN_ADDR=127.0.0.1:18952, LADDER_ADDR=127.0.0.1:18953 (the servers'
# addresses: give each engineer running benchmarks on one machine ports of
# their own).
#
# A third table per round is the capability budget: ticket6:readLedger
# called straight on the demo's stand-in ledger (a go-sdk MCP server) and
# the same call through ladder's capability tool (auth, scope check, lane,
# durable call record, then the upstream call over ladder's reused
# session), both closed loop; ladder must reach 0.7× the direct calls/s.
# CAPABILITY=0 skips it. By default the stand-in systems run inside the
# demo's process, sharing its heap, collector and scheduler; with
# STANDIN_ADDR=127.0.0.1:18954 they run in a process of their own
# (bench/standin, on that address), as a deployment's upstreams do, and the
# demo calls them there (ladder demo --upstream). LADDER_GOMEMLIMIT=28MiB
# gives the demo alone Go's soft memory limit (GOMEMLIMIT; docs/operations.md,
# "Memory"). Each round ends with the demo's resident memory
# now and its peak under each load that reaches it (DESIGN §11 budgets
# it under the capability load), with the split at the highest sample.
set -euo pipefail

CLIENTS=${CLIENTS:-64}
DURATION=${DURATION:-12s}
WARMUP=${WARMUP:-3s}
ROUNDS=${ROUNDS:-1}
PROTOCOL=${PROTOCOL:-2025-06-18}
RATE_FACTOR=${RATE_FACTOR:-0.8}
CAPABILITY=${CAPABILITY:-1}
BARE_ADDR=${BARE_ADDR:-127.0.0.1:18951}
PLAIN_ADDR=${PLAIN_ADDR:-127.0.0.1:18952}
LADDER_ADDR=${LADDER_ADDR:-127.0.0.1:18953}
STANDIN_ADDR=${STANDIN_ADDR:-}
LADDER_GOMEMLIMIT=${LADDER_GOMEMLIMIT:-}

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
(cd "$root" && go build -o "$bin/" ./bench/bareserver ./bench/plainserver ./bench/loadgen ./bench/standin ./cmd/ladder)
# On disk before the demo starts, as an installed binary is: ladder hands
# its start-up pages back to the kernel once up, and the kernel reclaims a
# page of a file still being written only after writing it out.
sync "$bin/ladder"

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

# A port something already listens on would measure someone else's server
# (wait_port cannot tell): refuse to start instead.
for a in "$BARE_ADDR" "$PLAIN_ADDR" "$LADDER_ADDR" $STANDIN_ADDR; do
	if (exec 3<>"/dev/tcp/127.0.0.1/${a##*:}") 2>/dev/null; then
		echo "run.sh: $a is already in use (another benchmark?); set BARE_ADDR, PLAIN_ADDR, LADDER_ADDR and STANDIN_ADDR to free ports" >&2
		exit 1
	fi
done

"$bin/bareserver" -addr "$BARE_ADDR" 2>"$out/bareserver.log" &
pids+=($!)
"$bin/plainserver" -addr "$PLAIN_ADDR" 2>"$out/plainserver.log" &
pids+=($!)
demo_upstream=()
if [ -n "$STANDIN_ADDR" ]; then
	"$bin/standin" -addr "$STANDIN_ADDR" >"$out/standin.out" 2>"$out/standin.log" &
	pids+=($!)
	wait_port "$STANDIN_ADDR"
	demo_upstream=(--upstream "http://$STANDIN_ADDR")
fi
demo_env=()
[ -z "$LADDER_GOMEMLIMIT" ] || demo_env=("GOMEMLIMIT=$LADDER_GOMEMLIMIT")
env "${demo_env[@]}" "$bin/ladder" demo "${demo_upstream[@]}" --addr "$LADDER_ADDR" --db "$tmp/ladder.db" --keys "$tmp/keys.json" --gateway "$tmp/gateway.yaml" --env-file "$tmp/demo.env" >"$out/ladder-demo.out" 2>"$out/ladder-demo.log" &
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
# Seeding the 14 weeks peaks higher than serving does, and each load has
# its own peak: the kernel's peak-RSS mark is reset (clear_refs 5) before
# each load that reaches the demo, see phase.
[ -w "/proc/$demo_pid/clear_refs" ] || echo "run.sh: cannot reset the demo's peak RSS; the peaks printed include its seeding" >&2
# The demo's memory is printed per load that reaches it (route_item, the
# stand-in ledger called directly, the capability call through ladder):
# phase NAME resets the kernel's peak mark before a load and phase_end
# keeps the peak after it. The kernel's peak says how much, not what, so
# sample_peak also samples the demo every second and, at each new high of
# the phase, keeps its anonymous/file split and the Go runtime's figures
# from /metrics. It reads with shell builtins and ticks once a second: a
# loop that forked awk and cat every 0.2 s and scraped /metrics at each
# new high took ~9% off route_item's calls/s (BENCHMARKS.md, "Issue 22
# (session 23)"), and the peak itself is the kernel's mark, not a sample.
phase() {
	echo 5 >"/proc/$demo_pid/clear_refs" 2>/dev/null || true
	echo "$1" >"$tmp/phase"
}
phase_end() {
	awk '/^VmHWM/ {print $2}' "/proc/$demo_pid/status" >"$tmp/hwm.$(cat "$tmp/phase")" 2>/dev/null || true
	echo - >"$tmp/phase"
}
echo - >"$tmp/phase"
sample_peak() {
	local max=0 cur=- ph k v rest rss anon file
	while :; do
		rss= anon= file=
		while read -r k v rest; do
			case $k in
			VmRSS:) rss=$v ;;
			RssAnon:) anon=$v ;;
			RssFile:) file=$v ;;
			esac
		done 2>/dev/null <"/proc/$demo_pid/status" || break
		[ -n "$rss" ] || break
		# A read that meets phase() between its truncate and its write finds
		# nothing; it keeps the phase, or the next sample would restart the
		# phase's maximum and overwrite its peak with a lower one.
		read -r ph <"$tmp/phase" || true
		[ -n "$ph" ] || ph=$cur
		[ "$ph" = "$cur" ] || { cur=$ph; max=0; }
		if [ "$cur" != - ] && [ "$rss" -gt "$max" ]; then
			max=$rss
			{
				echo "$rss $anon $file"
				curl -s -m 1 "http://$LADDER_ADDR/metrics" 2>/dev/null | grep -E '^go_(memstats_(heap_inuse|heap_idle|heap_released|stack_inuse|next_gc)_bytes|goroutines) ' || true
			} >"$tmp/peak.new"
			mv "$tmp/peak.new" "$tmp/peak.$cur"
		fi
		sleep 1
	done
}
sample_peak &
pids+=($!)
# print_peak NAME LABEL prints the demo's peak during phase NAME.
print_peak() {
	[ -s "$tmp/hwm.$1" ] || return 0
	printf 'ladder demo under %s: peak %.1f MiB resident\n' "$2" "$(awk '{print $1/1024}' "$tmp/hwm.$1")"
	# The split at the highest sample (file: the executable's pages;
	# anonymous: Go heap, stacks, runtime metadata, SQLite's memory).
	[ -s "$tmp/peak.$1" ] && awk 'NR == 1 {rss=$1; anon=$2; file=$3; next}
		{v[$1]=$2}
		END {m=1048576; printf "  highest sample %.1f MiB: anonymous %.1f, file %.1f; Go heap in use %.1f MiB, idle not yet returned %.1f, stacks %.1f (%d goroutines), next GC at %.1f\n",
			rss/1024, anon/1024, file/1024, v["go_memstats_heap_inuse_bytes"]/m, (v["go_memstats_heap_idle_bytes"]-v["go_memstats_heap_released_bytes"])/m,
			v["go_memstats_stack_inuse_bytes"]/m, v["go_goroutines"], v["go_memstats_next_gc_bytes"]/m}' "$tmp/peak.$1"
	rm -f "$tmp/hwm.$1" "$tmp/peak.$1"
}

common=(-clients "$CLIENTS" -duration "$DURATION" -warmup "$WARMUP" -protocol-version "$PROTOCOL" -json)
# The stand-in ledger's address: standin's, or the demo's from its log.
upstream=http://$STANDIN_ADDR
[ -n "$STANDIN_ADDR" ] || upstream=$(grep -m1 '"msg":"demo upstream listening"' "$out/ladder-demo.log" | sed -n 's/.*"url":"\([^"]*\)".*/\1/p' || true)
if [ -z "$upstream" ]; then
	echo "run.sh: no 'demo upstream listening' line in $out/ladder-demo.log" >&2
	exit 1
fi
scope='"program":"partner-2027","relationship":"relationship:partner-2027:creator-1"'
ladder_args=(-url "http://$LADDER_ADDR/mcp" -demo-keys "$tmp/keys.json" -workspace vantrow-bills -tool route_item
	-args '{"step":"post_tms","item":"BENCH-{run}-{n}"}')
echo
echo "$(nproc) cores, $(go version | cut -d' ' -f3-), $CLIENTS clients, $DURATION each after $WARMUP warm-up, protocol $PROTOCOL${STANDIN_ADDR:+, stand-ins in their own process}${LADDER_GOMEMLIMIT:+, the demo with GOMEMLIMIT=$LADDER_GOMEMLIMIT}"
for round in $(seq "$ROUNDS"); do
	echo "round $round: bare go-sdk…" >&2
	"$bin/loadgen" "${common[@]}" -name "bare go-sdk (no-op tool)" -url "http://$BARE_ADDR/mcp" -tool noop >"$out/bare.$round.json"
	echo "round $round: plain net/http…" >&2
	"$bin/loadgen" "${common[@]}" -name "plain net/http (fixed result)" -url "http://$PLAIN_ADDR/mcp" -tool noop >"$out/plain.$round.json"
	echo "round $round: ladder route_item…" >&2
	phase route
	"$bin/loadgen" "${common[@]}" -name "ladder route_item (auth + decision + durable audit)" "${ladder_args[@]}" >"$out/ladder.$round.json"
	phase_end
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
		phase direct
		"$bin/loadgen" "${common[@]}" -name "readLedger straight to the stand-in ledger (go-sdk)" -url "$upstream/ledger/mcp" \
			-tool readLedger -args "{$scope}" >"$out/upstream.$round.json"
		phase_end
		phase capability
		"$bin/loadgen" "${common[@]}" -name "ticket6:readLedger through ladder" -url "http://$LADDER_ADDR/mcp" \
			-demo-keys "$tmp/keys.json" -workspace partner-programs -tool ticket6:readLedger \
			-args "{$scope,\"payload\":{}}" >"$out/capability.$round.json"
		phase_end
		echo
		echo "Round $round, a capability call proxied to an upstream MCP tool (budget: 0.7× direct):"
		echo
		"$bin/loadgen" -table "$out/upstream.$round.json" "$out/capability.$round.json"
	fi
	# The demo's memory (DESIGN.md §11 budgets its RSS under the capability
	# load): its resident set now, and its peak under each load.
	if [ -r "/proc/$demo_pid/status" ]; then
		echo
		awk '/^VmRSS/ {rss=$2} /^RssAnon/ {anon=$2} /^RssFile/ {file=$2} END {printf "ladder demo resident now: %.1f MiB (anonymous %.1f, file %.1f)\n", rss/1024, anon/1024, file/1024}' "/proc/$demo_pid/status"
		print_peak route "the route_item load"
		# With the stand-ins in their own process, the direct load does not
		# reach the demo, and its peak then says nothing.
		[ -n "$STANDIN_ADDR" ] || print_peak direct "the stand-in ledger called directly (in the demo's process, ladder idle)"
		print_peak capability "the capability load through ladder"
	fi
done
