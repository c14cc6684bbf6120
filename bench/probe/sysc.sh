#!/usr/bin/env bash
# sysc.sh BIN PORT: fsync, pwrite and pread calls per capability call
# (perf stat over 5 s of the load).
# Probes of issue 22 (BENCHMARKS.md, "Issue 22 (session 5)"): each starts
# `ladder demo` from BIN on 127.0.0.1:PORT with its files in a temporary
# folder, drives it with bench/loadgen (build it first:
# go build -o bench/bin/ ./bench/loadgen), and stops the demo by its pid.
LOADGEN=${LOADGEN:-$(cd "$(dirname "$0")/.." && pwd)/bin/loadgen}
BIN=$1; PORT=$2
T=$(mktemp -d /tmp/sysc-XXXX)
$BIN demo --addr 127.0.0.1:$PORT --db $T/l.db --keys $T/keys.json --gateway $T/g.yaml --env-file $T/d.env >$T/out 2>$T/log &
P=$!
for i in $(seq 3000); do [ -s $T/keys.json ] && break; sleep 0.1; done
sleep 1
scope='"program":"partner-2027","relationship":"relationship:partner-2027:creator-1"'
"$LOADGEN" -clients 64 -duration 9s -warmup 0s -url "http://127.0.0.1:$PORT/mcp" -demo-keys $T/keys.json -workspace partner-programs -tool ticket6:readLedger -args "{$scope,\"payload\":{}}" -json > $T/c.json &
L=$!
sleep 2
perf stat -e 'syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync,syscalls:sys_enter_pwrite64,syscalls:sys_enter_pread64' -p $P -o $T/stat -- sleep 5
wait $L
python3 - $T <<'PY'
import json,sys,re
T=sys.argv[1]; d=json.load(open(T+'/c.json')); rate=d['calls_per_s']
calls=rate*5
out={}
for line in open(T+'/stat'):
    m=re.match(r'\s*([\d,]+)\s+syscalls:sys_enter_(\w+)',line)
    if m: out[m.group(2)]=int(m.group(1).replace(',',''))
print('rate %.0f'%rate, ' '.join('%s/call %.2f'%(k,v/calls) for k,v in out.items()))
PY
kill $P; wait $P 2>/dev/null; rm -rf $T
