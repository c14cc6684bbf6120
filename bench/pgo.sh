#!/usr/bin/env bash
# pgo.sh refreshes cmd/ladder/default.pgo, the CPU profile the Go toolchain
# uses for profile-guided optimisation of every `go build ./cmd/ladder`
# (-pgo=auto, the default: it inlines and devirtualises the calls that are
# hot in the profile, in ladder, its dependencies and the standard library).
#
# The profile comes from the real binary under the loads bench/run.sh
# measures: `ladder demo` on loopback, 64 clients of bench/loadgen calling
# route_item, then the capability call through ladder (which also runs the
# demo's stand-in ledger), DURATION of each. To read a profile out of the
# binary it builds a copy with one extra file, given to the compiler with
# -overlay (nothing in the tree changes; the shipped binary has no pprof
# endpoint): net/http/pprof on a loopback port of its own. The two profiles
# are merged with `go tool pprof -proto` into cmd/ladder/default.pgo.
#
# Run it after a change that moves where a call's time goes, then commit
# the new profile with the numbers it gives (BENCHMARKS.md, "Issue 22
# (session 18)"). A stale profile is still safe: the compiler matches
# functions by name and line offset and ignores what it cannot find.
#
# Usage: bench/pgo.sh            (from anywhere in the repository)
# Knobs: DURATION=30s, CLIENTS=64, ADDR=127.0.0.1:18971 (the demo),
# PPROF_ADDR=127.0.0.1:18972 (its profile listener).
set -euo pipefail

DURATION=${DURATION:-30s}
CLIENTS=${CLIENTS:-64}
ADDR=${ADDR:-127.0.0.1:18971}
PPROF_ADDR=${PPROF_ADDR:-127.0.0.1:18972}

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ladder-pgo-XXXXXX")
demo_pid=
cleanup() {
	if [ -n "$demo_pid" ]; then
		kill "$demo_pid" 2>/dev/null || true
		wait "$demo_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
	rm -f "$root/cmd/ladder/default.pgo.new"
}
trap cleanup EXIT INT TERM

secs=${DURATION%s}
case $secs in
'' | *[!0-9]*)
	echo "pgo.sh: DURATION must be whole seconds, like 30s (got $DURATION)" >&2
	exit 2
	;;
esac
for a in "$ADDR" "$PPROF_ADDR"; do
	case ${a%:*} in
	127.0.0.1 | localhost | '[::1]') ;;
	*)
		echo "pgo.sh: $a is not a loopback address; the profile listener must not be reachable from elsewhere" >&2
		exit 2
		;;
	esac
	if (exec 3<>"/dev/tcp/127.0.0.1/${a##*:}") 2>/dev/null; then
		echo "pgo.sh: $a is already in use; set ADDR and PPROF_ADDR to free ports" >&2
		exit 1
	fi
done

cat >"$tmp/pprof.go" <<'EOF'
package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

// The profiling copy only: serve net/http/pprof where bench/pgo.sh asks.
func init() {
	if addr := os.Getenv("LADDER_PGO_PPROF_ADDR"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
EOF
printf '{"Replace":{"%s":"%s"}}\n' "$root/cmd/ladder/zz_pgo_pprof.go" "$tmp/pprof.go" >"$tmp/overlay.json"

echo "building the profiling copy and the load generator…" >&2
(cd "$root" && go build -overlay "$tmp/overlay.json" -o "$tmp/ladder" ./cmd/ladder && go build -o "$tmp/loadgen" ./bench/loadgen)

LADDER_PGO_PPROF_ADDR=$PPROF_ADDR "$tmp/ladder" demo --addr "$ADDR" --db "$tmp/ladder.db" --keys "$tmp/keys.json" \
	--gateway "$tmp/gateway.yaml" --env-file "$tmp/demo.env" >"$tmp/demo.out" 2>"$tmp/demo.log" &
demo_pid=$!
# The demo writes its keys file once it serves.
for _ in $(seq 3000); do [ -s "$tmp/keys.json" ] && break; sleep 0.1; done
[ -s "$tmp/keys.json" ] || { echo "pgo.sh: the demo wrote no keys file after 5 minutes:" >&2; tail -5 "$tmp/demo.log" >&2; exit 1; }

# profile NAME LOADGEN-ARGS...: a CPU profile of DURATION while loadgen
# keeps the demo busy (it starts 2 s before and ends 2 s after).
profile() {
	local name=$1
	shift
	echo "profiling $name for $DURATION…" >&2
	"$tmp/loadgen" -clients "$CLIENTS" -duration "$((secs + 4))s" -warmup 0s -json "$@" >"$tmp/$name.json" &
	local lg=$!
	sleep 2
	if ! curl -sf -m "$((secs + 30))" -o "$tmp/$name.pb.gz" "http://$PPROF_ADDR/debug/pprof/profile?seconds=$secs"; then
		echo "pgo.sh: no profile from $PPROF_ADDR" >&2
		kill "$lg" 2>/dev/null || true
		exit 1
	fi
	wait "$lg"
	python3 - "$tmp/$name.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]}: {d['calls_per_s']:.0f} calls/s, {d['errors']} errors", file=sys.stderr)
if d['errors']:
    sys.exit(f"pgo.sh: the {sys.argv[2]} load had errors ({d.get('first_error', '')}); a profile of failing calls is not the one to build with")
PY
}

scope='"program":"partner-2027","relationship":"relationship:partner-2027:creator-1"'
profile route_item -url "http://$ADDR/mcp" -demo-keys "$tmp/keys.json" -workspace vantrow-bills -tool route_item \
	-args '{"step":"post_tms","item":"PGO-{run}-{n}"}'
profile capability -url "http://$ADDR/mcp" -demo-keys "$tmp/keys.json" -workspace partner-programs -tool ticket6:readLedger \
	-args "{$scope,\"payload\":{}}"

# Equal durations, so the merged profile weighs the two loads alike. It is
# written beside the old one and renamed over it, so a full disk or an
# interrupted run leaves the old profile whole ($tmp may be another
# filesystem, where mv copies).
new=$root/cmd/ladder/default.pgo.new
(cd "$root" && go tool pprof -proto "$tmp/route_item.pb.gz" "$tmp/capability.pb.gz" >"$new" 2>"$tmp/pprof.err") ||
	{ cat "$tmp/pprof.err" >&2; exit 1; }
mv -f "$new" "$root/cmd/ladder/default.pgo"
echo "wrote $root/cmd/ladder/default.pgo ($(wc -c <"$root/cmd/ladder/default.pgo") bytes)" >&2
