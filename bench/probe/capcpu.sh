#!/usr/bin/env bash
# capcpu.sh BIN PORT [DURATION] [perf]: calls/s and the demo's CPU per
# call for the stand-in ledger called directly, the capability call
# through ladder and route_item, one after another (with "perf", a
# perf record of each in the temporary folder, kept).
# Probes of issue 22 (BENCHMARKS.md, "Issue 22 (session 5)"): each starts
# `ladder demo` from BIN on 127.0.0.1:PORT with its files in a temporary
# folder, drives it with bench/loadgen (build it first:
# go build -o bench/bin/ ./bench/loadgen), and stops the demo by its pid.
# With STANDIN=127.0.0.1:PORT2 the stand-in systems run in a process of
# their own there (bench/standin: go build -o bench/bin/ ./bench/standin)
# and the demo calls them (--upstream), so the demo's CPU is ladder's
# alone; the stand-in's CPU a call is printed too, a yardstick of the
# machine's speed at that moment. Each line also gives the share of the
# demo's CPU spent in the kernel (/proc), the load generator's CPU a call,
# the machine's idle and iowait share (/proc/stat, all CPUs: a closed loop
# of 64 clients that leaves CPU idle waits on something serial, such as the
# group commit's fsync; BENCHMARKS.md, "Issue 22 (session 36)"), and from /metrics the group
# commit's writes a commit and commits a call, and the demo's heap
# allocated and garbage collections a call.
# With PAIRS=N it runs only the capability budget, as N pairs of the
# stand-in called directly and the call through ladder, each pair in the
# other order from the last (ABBA), and ends with each pair's ratio and
# the pooled one (ladder's calls over the direct calls, all pairs): the
# machine's speed drifts by a fifth from minute to minute here, and a
# ratio of two loads run minutes apart moves with it (BENCHMARKS.md,
# "Issue 22 (session 22)").
# With PIN=1 (needs STANDIN and two CPUs) the demo runs on CPU 1 and the
# stand-in and the load generator on CPU 0, in both loads of a pair: the
# upstream and its clients get the same one CPU whether ladder is in the
# path or not, and ladder a CPU of its own, as in a deployment where the
# gateway does not share the upstream's machine (BENCHMARKS.md, "Issue 22
# (session 27)"). Without it all three share both CPUs, which is the
# issue's measure.
BENCHBIN=$(cd "$(dirname "$0")/.." && pwd)/bin
LOADGEN=${LOADGEN:-$BENCHBIN/loadgen}
set -u
BIN=$1; PORT=$2; DUR=${3:-8s}; PERF=${4:-}; STANDIN=${STANDIN:-}; PAIRS=${PAIRS:-0}
ON0=(); ON1=()
if [ "${PIN:-0}" = 1 ]; then
  [ -n "$STANDIN" ] || { echo "capcpu.sh: PIN=1 needs STANDIN (the stand-ins in a process of their own)" >&2; exit 2; }
  [ "$(nproc --all)" -ge 2 ] || { echo "capcpu.sh: PIN=1 needs two CPUs" >&2; exit 2; }
  # taskset execs the program, so $! is still the program's pid.
  ON0=(taskset -c 0); ON1=(taskset -c 1)
fi
T=$(mktemp -d /tmp/capcpu-XXXX)
S=
upstream=()
if [ -n "$STANDIN" ]; then
  "${ON0[@]}" "${STANDIN_BIN:-$BENCHBIN/standin}" -addr "$STANDIN" >$T/standin.out 2>$T/standin.log &
  S=$!
  for i in $(seq 100); do [ -s $T/standin.out ] && break; sleep 0.1; done
  upstream=(--upstream "http://$STANDIN")
fi
"${ON1[@]}" $BIN demo "${upstream[@]}" --addr 127.0.0.1:$PORT --db $T/l.db --keys $T/keys.json --gateway $T/g.yaml --env-file $T/d.env >$T/out 2>$T/log &
P=$!
for i in $(seq 3000); do [ -s $T/keys.json ] && break; sleep 0.1; done
sleep 1
if [ -n "$STANDIN" ]; then UP=http://$STANDIN; else
UP=$(grep -m1 '"msg":"demo upstream listening"' $T/log | sed -n 's/.*"url":"\([^"]*\)".*/\1/p'); fi
scope='"program":"partner-2027","relationship":"relationship:partner-2027:creator-1"'
tk() { awk '{print $14+$15}' /proc/$1/stat; }
stk() { awk '{print $15}' /proc/$1/stat; }
# scrape: from /metrics, the group commit's commits and writes, the heap
# allocated and the collections so far.
scrape() { curl -s "http://127.0.0.1:$PORT/metrics" | awk '/^ladder_store_commits_total/ {c+=$2} /^ladder_store_writes_total/ {w+=$2} /^go_memstats_alloc_bytes_total/ {a=$2} /^go_gc_duration_seconds_count/ {g=$2} END {printf "%d %d %.0f %d\n", c, w, a, g}'; }
run() { # name, loadgen args... (the result in $T/name.json, or name.K.json in pair K)
  local name=$1; shift
  local out=$T/$name.json
  [ "$PAIRS" = 0 ] || out=$T/$name.$pair.json
  "${ON0[@]}" "$LOADGEN" -clients 64 -duration 2s -warmup 0s "$@" -json > /dev/null
  local c0=$(tk $P) k0=$(stk $P) s0=0 m0=$(scrape) st0 st1
  [ -z "$S" ] || s0=$(tk $S)
  st0=$(head -1 /proc/stat)
  if [ -n "$PERF" ]; then perf record -F 999 -g -p $P -o $T/perf.$name -- sleep 6 >/dev/null 2>&1 & PP=$!; fi
  local TIMEFORMAT='%U %S' # bash's time: the load generator's user and system CPU
  { time "${ON0[@]}" "$LOADGEN" -clients 64 -duration $DUR -warmup 0s "$@" -json > $out; } 2> $T/lg
  local c1=$(tk $P) k1=$(stk $P) s1=0 m1=$(scrape)
  st1=$(head -1 /proc/stat)
  [ -z "$S" ] || s1=$(tk $S)
  [ -n "$PERF" ] && wait $PP
  python3 - "$name" "$out" $((c1-c0)) $((s1-s0)) $m0 $m1 $((k1-k0)) "$st0" "$st1" $T/lg <<'PY'
import json,sys
name,f,ticks,sticks=sys.argv[1],sys.argv[2],int(sys.argv[3]),int(sys.argv[4])
c0,w0,a0,g0,c1,w1,a1,g1,kt=map(float,sys.argv[5:14])
st=[b-a for a,b in zip(map(int,sys.argv[14].split()[1:]),map(int,sys.argv[15].split()[1:]))]
lg=sum(float(x) for x in open(sys.argv[16]).read().split()[-2:])
d=json.load(open(f))
ok=d['calls']; rate=d['calls_per_s']
line=[name, 'calls', ok, 'errors', d['errors'], 'rate %.0f' % rate, 'p99 %.1f' % d['p99_ms'], 'demo cpu us/call %.0f' % (ticks*1e4/ok if ok else -1)]
if ticks >= 100: line.append('kernel %.0f%%' % (100*kt/ticks))  # a second of CPU or more: an idle demo's share says nothing
if sticks: line.append('standin cpu us/call %.0f' % (sticks*1e4/ok))
if ok: line.append('loadgen cpu us/call %.0f' % (lg*1e6/ok))
line.append('machine idle %.0f%% iowait %.0f%%' % (100*st[3]/sum(st[:8]), 100*st[4]/sum(st[:8])))
if c1 > c0 and ok: line.append('writes/commit %.1f commits/call %.3f' % ((w1-w0)/(c1-c0), (c1-c0)/ok))
if ok: line.append('alloc KB/call %.1f GCs/call %.4f' % ((a1-a0)/ok/1024, (g1-g0)/ok))
print(*line)
PY
}
direct() { run direct -url "$UP/ledger/mcp" -tool readLedger -args "{$scope}"; }
capability() { run capability -url "http://127.0.0.1:$PORT/mcp" -demo-keys $T/keys.json -workspace partner-programs -tool ticket6:readLedger -args "{$scope,\"payload\":{}}"; }
if [ "$PAIRS" != 0 ]; then
  for pair in $(seq "$PAIRS"); do
    if [ $((pair % 2)) = 1 ]; then direct; capability; else capability; direct; fi
  done
  python3 - "$T" "$PAIRS" <<'PY'
import json,sys
T,n=sys.argv[1],int(sys.argv[2])
rate=lambda name,k: json.load(open(f'{T}/{name}.{k}.json'))['calls_per_s']
d=[rate('direct',k) for k in range(1,n+1)]; c=[rate('capability',k) for k in range(1,n+1)]
print('pair ratios', ' '.join('%.3f' % (b/a) for a,b in zip(d,c)))
print('pooled: direct %.0f calls/s, through ladder %.0f, ratio %.3f' % (sum(d)/n, sum(c)/n, sum(c)/sum(d)))
PY
else
  direct
  capability
  run route -url "http://127.0.0.1:$PORT/mcp" -demo-keys $T/keys.json -workspace vantrow-bills -tool route_item -args '{"step":"post_tms","item":"BENCH-{run}-{n}"}'
  grep -E "VmHWM" /proc/$P/status
fi
kill $P $S; wait $P $S 2>/dev/null
[ -n "$PERF" ] && echo "perf data in $T" || rm -rf $T
