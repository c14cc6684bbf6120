package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ladderhq/ladder"
)

// Webhooks registers the delivery metrics on reg and returns the function
// that counts each try: ladder_webhook_attempts_total{endpoint, outcome}
// (delivered, failed: will be retried, dead: the last try failed;
// retired: never tried again, its endpoint was removed from the config),
// and,
// read from stats at each scrape, ladder_webhook_deliveries{status}
// (pending, retrying, delivered, dead) and
// ladder_webhook_oldest_undelivered_seconds. A nil reg registers nothing.
func Webhooks(reg prometheus.Registerer, stats func(context.Context) (ladder.DeliveryStats, error)) func(endpoint, outcome string) {
	tries := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ladder_webhook_attempts_total",
		Help: "Tries to deliver an event to an endpoint, by endpoint (workspace/name) and outcome: delivered, failed (retried later), dead (the last try failed; see ladder webhooks list --status dead) or retired (pending when its endpoint was removed from the config, now dead without a try).",
	}, []string{"endpoint", "outcome"}))
	if reg != nil && stats != nil {
		register(reg, &deliveryCollector{stats: stats})
	}
	return func(endpoint, outcome string) { tries.WithLabelValues(endpoint, outcome).Inc() }
}

var (
	deliveriesDesc = prometheus.NewDesc("ladder_webhook_deliveries",
		"Event deliveries by status: pending (not yet delivered), retrying (pending, tried at least once), delivered, dead (dead-lettered).", []string{"status"}, nil)
	oldestDesc = prometheus.NewDesc("ladder_webhook_oldest_undelivered_seconds",
		"Age of the oldest event not yet delivered to every endpoint that wants it (0 when none waits).", nil, nil)
)

// deliveryCollector reads the delivery figures from the store at each
// scrape, so every replica reports the shared state.
type deliveryCollector struct {
	stats func(context.Context) (ladder.DeliveryStats, error)
}

func (c *deliveryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- deliveriesDesc
	ch <- oldestDesc
}

func (c *deliveryCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.stats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(deliveriesDesc, err)
		return
	}
	for _, v := range []struct {
		status string
		n      int
	}{{"pending", st.Pending}, {"retrying", st.Retrying}, {"delivered", st.Delivered}, {"dead", st.Dead}} {
		ch <- prometheus.MustNewConstMetric(deliveriesDesc, prometheus.GaugeValue, float64(v.n), v.status)
	}
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, st.OldestPending.Seconds())
}

// laneRank orders the lanes from the most guarded to the least.
var laneRank = map[ladder.Lane]int{ladder.LaneHumanOnly: 0, ladder.LaneShadow: 1, ladder.LanePropose: 2, ladder.LaneAuto: 3}

// LaneChanges returns the function that counts a committed lane change in
// ladder_lane_changes_total{workspace, direction} of reg: promotion,
// demotion, or same (a pin or unpin that keeps the lane). A nil reg gets
// an unregistered counter.
func LaneChanges(reg prometheus.Registerer) func(ladder.LaneChange) {
	c := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ladder_lane_changes_total",
		Help: "Lane changes committed by this replica, by workspace and direction: promotion, demotion (toward human_only), or same (a pin or unpin that keeps the lane).",
	}, []string{"workspace", "direction"}))
	return func(ch ladder.LaneChange) {
		dir := "same"
		switch from, to := laneRank[ch.From], laneRank[ch.To]; {
		case to > from:
			dir = "promotion"
		case to < from:
			dir = "demotion"
		}
		c.WithLabelValues(ch.Workspace, dir).Inc()
	}
}

// OldestPendingApproval registers the gauge
// ladder_approvals_oldest_pending_seconds on reg, read from oldest. A nil
// reg registers nothing.
func OldestPendingApproval(reg prometheus.Registerer, oldest func() time.Duration) {
	register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ladder_approvals_oldest_pending_seconds",
		Help: "How long the oldest pending approval has waited for a person, as of the last once-a-minute expiry sweep (0 when none waits).",
	}, func() float64 { return oldest().Seconds() }))
}
