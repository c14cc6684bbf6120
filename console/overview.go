package console

import (
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/ladderhq/ladder"
)

// overviewScan bounds the pending approvals the overview reads to count and
// age them; past it the page says "at least".
const overviewScan = 1000

// laneGroup is one lane of the overview and the steps standing in it.
type laneGroup struct {
	Lane  ladder.Lane
	Steps []stepRow
}

// laneMove is one lane change of the past week.
type laneMove struct {
	ladder.LaneChange
	Name     string
	Demotion bool
}

// waitingApproval is a pending approval as the overview lists it.
type waitingApproval struct {
	ID, Capability, Item string
	At                   time.Time
	Age                  string
}

// overviewData is the overview page's data.
type overviewData struct {
	Workspace *ladder.Workspace
	Now       time.Time
	Lanes     []laneGroup
	Moves     []laneMove
	MovesText string // "3 lane changes"
	Demotions int
	// Waiting counts pending approvals (More: there are more than that),
	// Ages buckets them by how long they have waited, and Oldest are the
	// longest-waiting few.
	Waiting  int
	More     bool
	Ages     []ageBucket
	Oldest   []waitingApproval
	Shadows  int
	Audits   int
	InboxMax bool // the inbox holds more than its first page counted
}

// ageBucket counts waiting approvals of one age range.
type ageBucket struct {
	Label string
	N     int
}

// overview is the workspace's home: its steps by lane, what moved this
// week, and how much waits for a person and for how long.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r)
	ctx := r.Context()
	now := h.svc.Now()
	d := overviewData{Now: now}
	d.Workspace, _ = h.svc.Workspace(p.Workspace)

	view, err := h.svc.StepsRunAlone(ctx, p.Workspace, "", "")
	if err != nil {
		return err
	}
	byLane := map[ladder.Lane][]stepRow{}
	weekAgo := now.Add(-7 * 24 * time.Hour)
	for _, s := range view.Steps {
		row := stepRow{StepSummary: s}
		if ev, err := h.svc.Evidence(ctx, p.Workspace, s.Queue, s.Step); err == nil {
			row.Pinned = ev.Pinned
			row.Rolling4 = newWindowView(ev.Figures.Rolling4)
			for _, ch := range ev.LaneChanges {
				if ch.At.Before(weekAgo) || ch.At.After(now) {
					continue
				}
				m := laneMove{LaneChange: ch, Name: s.Name, Demotion: slices.Index(ladder.Lanes, ch.To) < slices.Index(ladder.Lanes, ch.From)}
				if m.Demotion {
					d.Demotions++
				}
				d.Moves = append(d.Moves, m)
			}
		}
		byLane[s.Lane] = append(byLane[s.Lane], row)
	}
	// Highest lane first: what runs alone leads.
	for i := len(ladder.Lanes) - 1; i >= 0; i-- {
		l := ladder.Lanes[i]
		d.Lanes = append(d.Lanes, laneGroup{Lane: l, Steps: byLane[l]})
	}
	sort.SliceStable(d.Moves, func(i, j int) bool { return d.Moves[i].At.After(d.Moves[j].At) })
	d.MovesText = countText(len(d.Moves), "lane change")

	var waiting []waitingApproval
	cursor := ""
	for len(waiting) < overviewScan {
		pg, err := h.svc.ListApprovals(ctx, p, string(ladder.ApprovalPending), cursor, 500)
		if err != nil {
			return err
		}
		for _, a := range pg.Approvals {
			if a.Status != ladder.ApprovalPending {
				continue
			}
			c, _ := h.svc.FindCapability(p.Workspace, a.Capability)
			waiting = append(waiting, waitingApproval{ID: a.ID, Capability: a.Capability, Item: businessItem(a.Approval, c), At: a.CreatedAt, Age: age(now, a.CreatedAt)})
		}
		if cursor = pg.NextCursor; cursor == "" {
			break
		}
	}
	d.Waiting, d.More = len(waiting), cursor != ""
	d.Ages = []ageBucket{{Label: "under an hour"}, {Label: "1 to 24 hours"}, {Label: "1 to 3 days"}, {Label: "over 3 days"}}
	for _, a := range waiting {
		switch wait := now.Sub(a.At); {
		case wait < time.Hour:
			d.Ages[0].N++
		case wait < 24*time.Hour:
			d.Ages[1].N++
		case wait < 72*time.Hour:
			d.Ages[2].N++
		default:
			d.Ages[3].N++
		}
	}
	sort.SliceStable(waiting, func(i, j int) bool { return waiting[i].At.Before(waiting[j].At) })
	d.Oldest = waiting[:min(3, len(waiting))]

	in, err := h.svc.Inbox(ctx, p, "", 100)
	if err != nil {
		return err
	}
	for _, it := range in.Items {
		switch it.Kind {
		case ladder.InboxShadow:
			d.Shadows++
		case ladder.InboxAudit:
			d.Audits++
		}
	}
	d.InboxMax = in.NextCursor != ""
	h.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Data: d})
	return nil
}
