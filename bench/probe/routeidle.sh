#!/usr/bin/env bash
# routeidle.sh BIN PORT [DURATION]: route_item's calls/s, ladder's and the
# load generator's CPU a call, and how much of the machine stood idle or
# waited on the disk while 64 clients drove it.
# A probe of issue 22 (BENCHMARKS.md, "Issue 22 (session 36)"): it starts
# `ladder demo` from BIN on 127.0.0.1:PORT with its files in a temporary
# folder, drives it with bench/loadgen (build it first:
# go build -o bench/bin/ ./bench/loadgen) for DURATION (default 10s), and
# stops the demo by its pid. The idle and iowait columns are /proc/stat's,
# summed over the machine's CPUs, in ticks (USER_HZ, 100 a second): with
# two CPUs a 10 s run has 2,000 in all. A closed loop of 64 clients that
# leaves CPU idle is waiting on something serial (the group commit's
# fsync), not on CPU.
set -eu
LOADGEN=${LOADGEN:-$(cd "$(dirname "$0")/.." && pwd)/bin/loadgen}
BIN=$1; PORT=$2; DUR=${3:-10s}
T=$(mktemp -d /tmp/routeidle-XXXX)
"$BIN" demo --addr 127.0.0.1:"$PORT" --db "$T"/l.db --keys "$T"/keys.json --gateway "$T"/g.yaml --env-file "$T"/d.env >"$T"/out 2>&1 &
P=$!
trap 'kill $P 2>/dev/null; wait $P 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 300); do [ -s "$T"/keys.json ] && break; sleep 0.1; done
sleep 1
c0=$(awk '{print $14+$15}' /proc/$P/stat); head -1 /proc/stat >"$T"/s0
TIMEFORMAT='%U %S' # bash's time: the load generator's user and system CPU
{ time "$LOADGEN" -clients 64 -duration "$DUR" -warmup 0s -json \
  -url "http://127.0.0.1:$PORT/mcp" -demo-keys "$T"/keys.json -workspace vantrow-bills -tool route_item \
  -args '{"step":"post_tms","item":"IDLE-{run}-{n}"}' >"$T"/r.json 2>/dev/null; } 2>"$T"/lg
c1=$(awk '{print $14+$15}' /proc/$P/stat); head -1 /proc/stat >"$T"/s1
python3 - "$T" "$c0" "$c1" <<'PY'
import json, sys
T, c0, c1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = json.load(open(f'{T}/r.json'))
lg = sum(float(x) for x in open(f'{T}/lg').read().split()[-2:])
s0 = [int(x) for x in open(f'{T}/s0').read().split()[1:]]
s1 = [int(x) for x in open(f'{T}/s1').read().split()[1:]]
d = [b - a for a, b in zip(s0, s1)]
n = r['calls']
print('route_item %.0f calls/s, errors %d; ladder %.1f µs of CPU a call, load generator %.1f; machine idle %d, iowait %d of %d ticks'
      % (r['calls_per_s'], r['errors'], (c1 - c0) * 1e4 / n, lg * 1e6 / n, d[3], d[4], sum(d[:8])))
PY
