// Package metrics holds the Prometheus collectors that more than one
// surface shares, registered once per registry.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
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

// register registers c with reg, or returns the counter of the same name
// reg already holds.
func register(reg prometheus.Registerer, c *prometheus.CounterVec) *prometheus.CounterVec {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
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
