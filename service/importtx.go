package service

import (
	"slices"
	"strings"

	"github.com/ladderhq/ladder"
)

// importTx is the store's import transaction with what the import reads
// over and over kept in memory: each step's state (locked once, written
// back once at the end) and its week rows (read once, their changes added
// back once per row at the end), and the routes the import made, which
// nothing else can have touched. Every other read and every insert goes to
// the store's transaction, so the rows, reviews, lane changes, outcomes and
// audit records are written as they are replayed. A review replayed
// through it reads and writes exactly what it would through the store's
// transaction alone; it saves most of an imported row's statements.
type importTx struct {
	ladder.ImportTx
	states map[ladder.StepKey]*cachedState
	weeks  map[ladder.StepKey]map[weekRowKey]*weekRow
	routes map[string]*importedRouteState // routes this import inserted
}

type cachedState struct {
	state ladder.StepState
	dirty bool
}

type weekRowKey struct {
	week  string
	epoch int
}

// weekRow is a week row as it stands in the import, and what the import
// added to it (to write back).
type weekRow struct {
	row   ladder.WeekAgg
	added ladder.WeekAgg
	dirty bool
}

// importedRouteState is what the import knows of a route it inserted.
type importedRouteState struct {
	route    ladder.Route
	reviewed bool // a review that is not an adjudication
	counted  *ladder.CountedReview
}

func newImportTx(tx ladder.ImportTx) *importTx {
	return &importTx{ImportTx: tx, states: map[ladder.StepKey]*cachedState{}, weeks: map[ladder.StepKey]map[weekRowKey]*weekRow{}, routes: map[string]*importedRouteState{}}
}

// LockState locks the step's state in the store's transaction once and
// then answers from memory.
func (t *importTx) LockState(k ladder.StepKey) (ladder.StepState, error) {
	if c, ok := t.states[k]; ok {
		return c.state, nil
	}
	st, err := t.ImportTx.LockState(k)
	if err != nil {
		return st, err
	}
	t.states[k] = &cachedState{state: st}
	return st, nil
}

// UpdateState keeps the state in memory until flush.
func (t *importTx) UpdateState(st ladder.StepState) error {
	k := ladder.StepKey{Workspace: st.Workspace, Queue: st.Queue, Step: st.Step}
	if _, err := t.LockState(k); err != nil {
		return err
	}
	t.states[k] = &cachedState{state: st, dirty: true}
	return nil
}

// InsertRoute stores the route and remembers it.
func (t *importTx) InsertRoute(r ladder.Route) error {
	if err := t.ImportTx.InsertRoute(r); err != nil {
		return err
	}
	t.routes[r.ID] = &importedRouteState{route: r}
	return nil
}

// RouteOf answers for the import's own routes from memory.
func (t *importTx) RouteOf(id string) (ladder.Route, error) {
	if r, ok := t.routes[id]; ok {
		return r.route, nil
	}
	return t.ImportTx.RouteOf(id)
}

// Reviewed answers for the import's own routes from memory.
func (t *importTx) Reviewed(routeID string) (bool, error) {
	if r, ok := t.routes[routeID]; ok {
		return r.reviewed, nil
	}
	return t.ImportTx.Reviewed(routeID)
}

// CountedReview answers for the import's own routes from memory.
func (t *importTx) CountedReview(routeID string) (ladder.CountedReview, bool, error) {
	if r, ok := t.routes[routeID]; ok {
		if r.counted == nil {
			return ladder.CountedReview{}, false, nil
		}
		return *r.counted, true, nil
	}
	return t.ImportTx.CountedReview(routeID)
}

// Uncount marks the review uncounted in the store and in memory.
func (t *importTx) Uncount(reviewID string) error {
	for _, r := range t.routes {
		if r.counted != nil && r.counted.Review.ID == reviewID {
			r.counted = nil
		}
	}
	return t.ImportTx.Uncount(reviewID)
}

// InsertReview stores the review and, for the import's own routes,
// remembers it.
func (t *importTx) InsertReview(rv ladder.Review, week string, epoch int) error {
	if err := t.ImportTx.InsertReview(rv, week, epoch); err != nil {
		return err
	}
	if r, ok := t.routes[rv.RouteID]; ok {
		r.reviewed = r.reviewed || !rv.Adjudication
		r.counted = &ladder.CountedReview{Review: rv, Week: week, Epoch: epoch}
	}
	return nil
}

// CloseShadow has nothing to close for a route the import made: no
// shadow proposal names it.
func (t *importTx) CloseShadow(routeID string) error {
	if _, ok := t.routes[routeID]; ok {
		return nil
	}
	return t.ImportTx.CloseShadow(routeID)
}

// rows returns the step's week rows, read from the store once.
func (t *importTx) rows(k ladder.StepKey) (map[weekRowKey]*weekRow, error) {
	if m, ok := t.weeks[k]; ok {
		return m, nil
	}
	stored, err := t.ImportTx.WeekAggs(k)
	if err != nil {
		return nil, err
	}
	m := map[weekRowKey]*weekRow{}
	for _, w := range stored {
		m[weekRowKey{w.ISOWeek, w.Epoch}] = &weekRow{row: w}
	}
	t.weeks[k] = m
	return m, nil
}

// AddToWeek adds the delta in memory; flush writes each row's sum.
func (t *importTx) AddToWeek(d ladder.WeekDelta) error {
	m, err := t.rows(d.Key)
	if err != nil {
		return err
	}
	wk := weekRowKey{d.Week, d.Epoch}
	r, ok := m[wk]
	if !ok {
		if !d.Create {
			return nil
		}
		r = &weekRow{row: ladder.WeekAgg{Workspace: d.Key.Workspace, Queue: d.Key.Queue, Step: d.Key.Step, ISOWeek: d.Week, WeekStart: d.WeekStart, Epoch: d.Epoch}}
		m[wk] = r
	}
	r.row, r.added, r.dirty = r.row.Plus(d.Counts), r.added.Plus(d.Counts), true
	return nil
}

// WeekAggs answers from memory, ordered as the stores order them.
func (t *importTx) WeekAggs(k ladder.StepKey) ([]ladder.WeekAgg, error) {
	m, err := t.rows(k)
	if err != nil {
		return nil, err
	}
	out := make([]ladder.WeekAgg, 0, len(m))
	for _, r := range m {
		out = append(out, r.row)
	}
	slices.SortFunc(out, func(a, b ladder.WeekAgg) int {
		if c := strings.Compare(a.ISOWeek, b.ISOWeek); c != 0 {
			return c
		}
		return a.Epoch - b.Epoch
	})
	return out, nil
}

// flush writes the states and week rows kept in memory to the store's
// transaction.
func (t *importTx) flush() error {
	for _, c := range t.states {
		if c.dirty {
			if err := t.ImportTx.UpdateState(c.state); err != nil {
				return err
			}
		}
	}
	for k, m := range t.weeks {
		for wk, r := range m {
			if !r.dirty {
				continue
			}
			if err := t.ImportTx.AddToWeek(ladder.WeekDelta{Key: k, Week: wk.week, WeekStart: r.row.WeekStart, Epoch: wk.epoch, Counts: r.added, Create: true}); err != nil {
				return err
			}
		}
	}
	return nil
}
