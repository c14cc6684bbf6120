// Package bench measures ladder's MCP surface against its speed budget
// (DESIGN §11): a governed route_item call over MCP must reach at least
// 0.8× the calls/s of a bare go-sdk server answering a no-op tool, with 64
// concurrent clients and a p99 of at most 10 ms.
//
//   - bareserver: the bare go-sdk baseline (stateless, JSON responses);
//   - plainserver: a plain net/http handler answering a fixed result;
//   - loadgen: the load generator;
//   - run.sh: builds them, runs all three servers and prints the table;
//   - the in-process benchmarks in this package (go test -bench) give the
//     CPU and allocation profiles of each path without the network.
//
// Results and findings are in BENCHMARKS.md at the repository root.
package bench
