// Package metrics holds the Prometheus collectors that more than one
// surface shares, registered once per registry.
package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ladderhq/ladder/internal/groupcommit"
)

// Refusals returns the counter ladder_refusals_total{surface, code} of reg,
// registering it on first use, so the REST server and the MCP surface count
// into the same series. A nil reg gets an unregistered counter.
func Refusals(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ladder_refusals_total",
		Help: "Refused requests by surface (rest, mcp) and refusal name (AUDIT_UNAVAILABLE, RATE_LIMITED, OVERLOADED, ...).",
	}, []string{"surface", "code"})
	return register(reg, c)
}

// register registers c with reg, or returns the collector of the same name
// reg already holds.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// ShadowProposalsDropped registers ladder_shadow_proposals_dropped_total on
// reg, read from dropped: calls to a step in shadow refused with
// STEP_NEEDS_PERSON whose proposal was not stored, because the key had
// server.max_shadow_proposals unreviewed ones for the step or the item's
// route was reviewed already. A nil reg registers nothing.
func ShadowProposalsDropped(reg prometheus.Registerer, dropped func() uint64) {
	register(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ladder_shadow_proposals_dropped_total",
		Help: "Shadow proposals not stored because their key was at server.max_shadow_proposals unreviewed ones for the step, or their item's route was reviewed already (the call was refused STEP_NEEDS_PERSON either way).",
	}, func() float64 { return float64(dropped()) }))
}

// ToolDefinitionChanges returns the counter
// ladder_tool_definition_changes_total{workspace, capability, change} of reg,
// registering it on first use. A nil reg gets an unregistered counter.
func ToolDefinitionChanges(reg prometheus.Registerer) *prometheus.CounterVec {
	return register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ladder_tool_definition_changes_total",
		Help: "Capability definitions found changed, added or removed since the previous start, by workspace, capability and change.",
	}, []string{"workspace", "capability", "change"}))
}

// UpstreamObserver returns a function that counts each executed capability
// call in ladder_upstream_calls_total{executor, capability, outcome} and
// records the upstream's time in ladder_upstream_call_seconds{executor,
// capability}, registered on reg on first use: what an operator needs to
// tell a slow or failing upstream from a slow ladder.
func UpstreamObserver(reg prometheus.Registerer) func(executor, capability, outcome string, d time.Duration) {
	calls := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ladder_upstream_calls_total",
		Help: "Capability calls executed, by executor (http, mcp, record), capability and outcome (ok, failed, timeout).",
	}, []string{"executor", "capability", "outcome"}))
	secs := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ladder_upstream_call_seconds",
		Help:    "Time an executed capability call took upstream, by executor and capability.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"executor", "capability"}))
	return func(executor, capability, outcome string, d time.Duration) {
		calls.WithLabelValues(executor, capability, outcome).Inc()
		secs.WithLabelValues(executor, capability).Observe(d.Seconds())
	}
}

// ResultsWaiting registers the gauge ladder_call_results_waiting on reg,
// read from waiting: results of calls that ran which the store has not
// taken yet, held in memory and retried. A nil reg registers nothing.
func ResultsWaiting(reg prometheus.Registerer, waiting func() int) {
	register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ladder_call_results_waiting",
		Help: "Results of calls that ran, held in memory because the store refused them, retried until it takes them (a replay on this replica answers from them).",
	}, func() float64 { return float64(waiting()) }))
}

// StoreWrites registers the group commit's counters on reg, read from
// stats: ladder_store_commits_total and ladder_store_writes_total (the
// writes those commits carried; the rate of one over the other is the batch
// size, which says how many callers share each sync), and
// ladder_store_commit_waits_total{ended} (the waits for more writes before
// a small commit, by whether more writes or the timer ended them). A nil
// reg registers nothing.
func StoreWrites(reg prometheus.Registerer, stats func() groupcommit.Stats) {
	register(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ladder_store_commits_total",
		Help: "Write transactions the store committed or tried to (group commit: each carries every write that arrived while the last one ran, and syncs once).",
	}, func() float64 { return float64(stats().Batches) }))
	register(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ladder_store_writes_total",
		Help: "Writes the store ran in those transactions; its rate over ladder_store_commits_total's is the batch size.",
	}, func() float64 { return float64(stats().Ops) }))
	for ended, n := range map[string]func(groupcommit.Stats) int64{
		"writes": func(s groupcommit.Stats) int64 { return s.Grown },
		"timer":  func(s groupcommit.Stats) int64 { return s.Expired },
	} {
		register(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "ladder_store_commit_waits_total",
			Help:        "Waits for more writes before a small commit (the SQLite store's linger), by what ended them: writes (the batch grew) or timer.",
			ConstLabels: prometheus.Labels{"ended": ended},
		}, func() float64 { return float64(n(stats())) }))
	}
}
