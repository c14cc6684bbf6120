// Package bench measures ladder's MCP surface against its speed budgets
// (DESIGN §11), 64 concurrent clients: a governed route_item call over MCP
// against a bare go-sdk server answering a no-op tool (≥1.5×) and a plain
// net/http handler (≥0.3×), and a capability call proxied to an upstream
// MCP tool against calling that upstream directly (≥0.7×).
//
//   - bareserver: the bare go-sdk baseline (stateless, JSON responses);
//   - plainserver: a plain net/http handler answering a fixed result;
//   - loadgen: the load generator, closed loop (each client sends its next
//     call when the last is answered) or open loop on a fixed schedule
//     (-rate), speaking protocol 2025-06-18 or 2026-07-28;
//   - standin: the demo's stand-in systems (the partner ledger the
//     capability benchmark calls) in a process of their own, for
//     `ladder demo --upstream URL`, as a deployment's upstreams are;
//   - run.sh: builds them, runs all three servers and prints, per round, a
//     closed-loop table and an open-loop table at 0.8× the bare server's
//     calls/s, then the capability table (with STANDIN_ADDR set, against
//     standin in its own process instead of the demo's in-process one);
//   - the in-process benchmarks in this package (go test -bench) give the
//     CPU and allocation profiles of each path without the network.
//   - pgo.sh: refreshes cmd/ladder/default.pgo, the CPU profile every build
//     of ./cmd/ladder is optimised with, from the real binary under
//     route_item and capability loads.
//
// Results and findings are in BENCHMARKS.md at the repository root.
package bench
