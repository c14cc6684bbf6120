#!/usr/bin/env bash
# walrun.sh BIN PORT capability|route: WAL pages a group commit writes, by
# b-tree (the demo is killed with -9 mid-load so its WAL is not
# checkpointed; needs python3 and the sqlite3 CLI).
# Probes of issue 22 (BENCHMARKS.md, "Issue 22 (session 5)"): each starts
# `ladder demo` from BIN on 127.0.0.1:PORT with its files in a temporary
# folder, drives it with bench/loadgen (build it first:
# go build -o bench/bin/ ./bench/loadgen), and stops the demo by its pid.
LOADGEN=${LOADGEN:-$(cd "$(dirname "$0")/.." && pwd)/bin/loadgen}
BIN=$1; PORT=$2; KIND=$3
T=$(mktemp -d /tmp/walrun-XXXX)
$BIN demo --addr 127.0.0.1:$PORT --db $T/l.db --keys $T/keys.json --gateway $T/g.yaml --env-file $T/d.env >$T/out 2>$T/log &
P=$!
for i in $(seq 3000); do [ -s $T/keys.json ] && break; sleep 0.1; done
sleep 2
W0=$(stat -c %s $T/l.db-wal); S0=$(python3 -c "import struct;d=open('$T/l.db-wal','rb').read(32);print('%08x%08x'%struct.unpack('>II',d[16:24]))")
scope='"program":"partner-2027","relationship":"relationship:partner-2027:creator-1"'
if [ $KIND = capability ]; then
"$LOADGEN" -clients 64 -duration 1s -warmup 0s -url "http://127.0.0.1:$PORT/mcp" -demo-keys $T/keys.json -workspace partner-programs -tool ticket6:readLedger -args "{$scope,\"payload\":{}}" >/dev/null &
else
"$LOADGEN" -clients 64 -duration 1s -warmup 0s -url "http://127.0.0.1:$PORT/mcp" -demo-keys $T/keys.json -workspace vantrow-bills -tool route_item -args '{"step":"post_tms","item":"BENCH-{run}-{n}"}' >/dev/null &
fi
sleep 0.6; kill -9 $P; wait
python3 "$(dirname "$0")/walpages.py" $T/l.db $W0 $S0
rm -rf $T
