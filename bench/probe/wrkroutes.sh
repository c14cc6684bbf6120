#!/usr/bin/env bash
# wrkroutes.sh BIN PORT [DURATION] [CLIENTS]: durable routes/s through one
# `ladder serve` from BIN on PostgreSQL, driven by wrk (Debian's package)
# instead of a Go client: POST /v1/route, a fresh item every request,
# CLIENTS (default 64) keep-alive connections on one wrk thread, a 2 s
# warm-up, then DURATION (default 8s) measured. It prints wrk's routes/s,
# p50 and p99, wrk's own CPU and ladder's CPU over the measured run.
# A probe of issue 22 (BENCHMARKS.md, "Issue 22 (session 28)"): on a
# two-CPU machine bench/routes' Go client takes nearly half of the CPU, and
# wrk about a twentieth, so this shows what ladder and PostgreSQL do when
# the load costs little. The database is $LADDER_TEST_POSTGRES; the schema
# (ladder_wrk_<random>) is dropped and the server stopped by its pid at
# the end, however the script ends. Needs wrk, curl, psql and python3.
set -euo pipefail
BIN=$1; PORT=$2; DUR=${3:-8s}; CLIENTS=${4:-64}
DSN=${LADDER_TEST_POSTGRES:?set LADDER_TEST_POSTGRES to the PostgreSQL DSN to measure on}
for tool in wrk curl psql python3; do
  command -v $tool >/dev/null || { echo "wrkroutes.sh: $tool is not installed (apt-get install -y wrk curl postgresql-client python3)" >&2; exit 2; }
done
REPO=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
SCHEMA=ladder_wrk_$(python3 -c 'import secrets; print(secrets.token_hex(6))')
LP=
cleanup() {
  if [ -n "$LP" ]; then kill "$LP" 2>/dev/null || true; wait "$LP" 2>/dev/null || true; fi
  psql -q "$DSN" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1 || true
  rm -rf "$T"
}
trap cleanup EXIT
# An admin key token of ladder's form, ldr_<id>_<secret> (keys.go).
token() { python3 -c "import base64,os; e=lambda b: base64.b32encode(b).decode().lower().rstrip('='); print('ldr_'+e(os.urandom(8))+'_'+e(os.urandom(16)))"; }
ADMIN=$(token)
LADDER_ADMIN_KEY=$ADMIN LADDER_AUDIT_SECRET=route-bench LADDER_PG_SCHEMA=$SCHEMA \
  "$BIN" serve --addr 127.0.0.1:$PORT --unsigned-audit --config "$REPO/config/demo.yaml" --db "$DSN" --max-inflight-per-key -1 2>"$T/log" &
LP=$!
for _ in $(seq 200); do curl -sf http://127.0.0.1:$PORT/readyz >/dev/null && break; sleep 0.05; done
curl -sf http://127.0.0.1:$PORT/readyz >/dev/null || { echo "wrkroutes.sh: ladder serve not ready:" >&2; cat "$T/log" >&2; exit 1; }
AGENT=$(curl -sf -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
  -d '{"workspace":"vantrow-bills","kind":"agent","name":"wrk"}' http://127.0.0.1:$PORT/v1/keys |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
RUN=$(python3 -c 'import secrets; print(secrets.token_hex(4))')
cat > "$T/route.lua" <<LUA
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer $AGENT"
wrk.headers["Content-Type"] = "application/json"
local i = 0
function request()
  i = i + 1
  return wrk.format(nil, "/v1/route", nil, '{"queue":"bills","step":"post_tms","item":"$RUN-' .. i .. '"}')
end
LUA
# The warm-up's items and the measured run's differ: each wrk run counts
# from 1, so the warm-up gets its own prefix.
sed "s/$RUN-/$RUN-w-/" "$T/route.lua" > "$T/warm.lua"
wrk -t1 -c"$CLIENTS" -d2s -s "$T/warm.lua" http://127.0.0.1:$PORT > "$T/warm"
cpu() { awk '{print $14+$15}' /proc/$LP/stat; }
TICK=$(getconf CLK_TCK)
C0=$(cpu)
/usr/bin/time -f "wrk's CPU: %U s user, %S s system" wrk -t1 -c"$CLIENTS" -d"$DUR" --latency -s "$T/route.lua" http://127.0.0.1:$PORT > "$T/out" 2>&1
C1=$(cpu)
grep -E "requests in|Requests/sec|Non-2xx|Socket errors| 50%| 99%|wrk's CPU" "$T/out"
echo "ladder's CPU over the measured run: $(( (C1 - C0) * 1000 / TICK )) ms"
# Every 200 is a durable route: the rows stored must cover every request
# answered in the warm-up and the run (wrk counts Non-2xx apart).
ANSWERED=$(cat "$T/warm" "$T/out" | awk '/requests in/ {n += $1} END {print n}')
echo "routes stored: $(psql -At "$DSN" -c "SELECT count(*) FROM $SCHEMA.routes"), requests answered (warm-up and run): $ANSWERED"
