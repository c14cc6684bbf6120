#!/usr/bin/env bash
# cgcount.sh TESTBIN BENCH [N1] [N2]: instructions per op of one benchmark
# of ./bench, counted by valgrind's callgrind: the whole process's
# instructions at N1 and at N2 ops, their difference divided by N2-N1
# (so the set-up, the same in both, drops out). A count, not a time: two
# builds compare on a busy machine, where calls/s do not (BENCHMARKS.md,
# "Issue 22 (session 8)").
# Build the test binary first: (cd bench && go test -c -o /tmp/bench.test .)
# Go's asynchronous preemption signals break callgrind, hence
# GODEBUG=asyncpreemptoff=1; and valgrind 3.19 cannot decode RDTSCP, which
# its emulated CPUID offers the runtime where the host has none, hence
# cpu.rdtscp=off (the runtime then reads the clock with RDTSC). Two things
# make the count follow the clock, not the work, so both are off by
# default: the collector (GOGC=off; when it runs depends on timing, and
# with it on the count moved by ±2.5% between runs of one build: compare
# allocations by -benchmem's B/op and allocs/op, printed beside) and idle
# processors spinning for work (GOMAXPROCS=1: with 2 the same run counted
# anywhere from 1.0 to 4.0 billion instructions; with 1, within 0.2%). Set
# either to count it. Each count takes under a minute (callgrind runs the
# program about 50 times slower, on one thread).
set -eu
BIN=$1; BENCH=$2; N1=${3:-200}; N2=${4:-1000}
T=$(mktemp -d /tmp/cgcount-XXXX)
trap 'rm -rf "$T"' EXIT
count() {
  (cd "$(dirname "$0")/.." && GOMAXPROCS=${GOMAXPROCS:-1} GOGC=${GOGC:-off} GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind --callgrind-out-file="$T/cg.$1" \
    "$BIN" -test.run '^$' -test.bench "$BENCH" -test.benchtime "$1x" -test.benchmem 2>"$T/err.$1" >"$T/out.$1") || { cat "$T/err.$1" >&2; exit 1; }
  grep -E '^Benchmark' "$T/out.$1" >&2
  sed -n 's/.*I *refs: *//p' "$T/err.$1" | tr -d ,
}
i1=$(count "$N1"); i2=$(count "$N2")
python3 -c "import sys; i1,i2,n1,n2=map(int,sys.argv[1:5]); print(f'{sys.argv[5]}: {(i2-i1)/(n2-n1):,.0f} instructions/op ({i1:,} at {n1} ops, {i2:,} at {n2})')" "$i1" "$i2" "$N1" "$N2" "$BENCH"
