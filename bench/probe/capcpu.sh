#!/usr/bin/env bash
# capcpu.sh BIN PORT [DURATION] [perf]: calls/s and the demo's CPU per
# call for the stand-in ledger called directly, the capability call
# through ladder and route_item, one after another (with "perf", a
# perf record of each in the temporary folder, kept).
# Probes of issue 22 (BENCHMARKS.md, "Issue 22 (session 5)"): each starts
# `ladder demo` from BIN on 127.0.0.1:PORT with its files in a temporary
# folder, drives it with bench/loadgen (build it first:
# go build -o bench/bin/ ./bench/loadgen), and stops the demo by its pid.
LOADGEN=${LOADGEN:-$(cd "$(dirname "$0")/.." && pwd)/bin/loadgen}
set -u
BIN=$1; PORT=$2; DUR=${3:-8s}; PERF=${4:-}
T=$(mktemp -d /tmp/capcpu-XXXX)
$BIN demo --addr 127.0.0.1:$PORT --db $T/l.db --keys $T/keys.json --gateway $T/g.yaml --env-file $T/d.env >$T/out 2>$T/log &
P=$!
for i in $(seq 3000); do [ -s $T/keys.json ] && break; sleep 0.1; done
sleep 1
UP=$(grep -m1 '"msg":"demo upstream listening"' $T/log | sed -n 's/.*"url":"\([^"]*\)".*/\1/p')
scope='"program":"partner-2027","relationship":"relationship:partner-2027:creator-1"'
tk() { awk '{print $14+$15}' /proc/$P/stat; }
run() { # name, loadgen args...
  local name=$1; shift
  "$LOADGEN" -clients 64 -duration 2s -warmup 0s "$@" -json > /dev/null
  local c0=$(tk)
  if [ -n "$PERF" ]; then perf record -F 999 -g -p $P -o $T/perf.$name -- sleep 6 >/dev/null 2>&1 & PP=$!; fi
  "$LOADGEN" -clients 64 -duration $DUR -warmup 0s "$@" -json > $T/$name.json
  local c1=$(tk)
  [ -n "$PERF" ] && wait $PP
  python3 - "$name" "$T/$name.json" $((c1-c0)) <<'PY'
import json,sys
name,f,ticks=sys.argv[1],sys.argv[2],int(sys.argv[3])
d=json.load(open(f))
ok=d['calls']; rate=d['calls_per_s']
print(name, 'calls', ok, 'errors', d['errors'], 'rate %.0f' % rate, 'p99 %.1f' % d['p99_ms'], 'demo cpu us/call %.0f' % (ticks*1e4/ok if ok else -1))
PY
}
run direct -url "$UP/ledger/mcp" -tool readLedger -args "{$scope}"
run capability -url "http://127.0.0.1:$PORT/mcp" -demo-keys $T/keys.json -workspace partner-programs -tool ticket6:readLedger -args "{$scope,\"payload\":{}}"
run route -url "http://127.0.0.1:$PORT/mcp" -demo-keys $T/keys.json -workspace vantrow-bills -tool route_item -args '{"step":"post_tms","item":"BENCH-{run}-{n}"}'
grep -E "VmHWM" /proc/$P/status
kill $P; wait $P 2>/dev/null
[ -n "$PERF" ] && echo "perf data in $T" || rm -rf $T
