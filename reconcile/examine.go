package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// finding is one SKU as both sides saw it, and what Redis should hold.
type finding struct {
	sku string
	// fence is the SKU's fence in Redis read before the database was read;
	// Adjust applies only if it is still the same.
	fence redisstock.Fence
	gate  redisstock.Snapshot
	rec   sqlstock.SKULevels
	// ops are the SKU's restocks the database applied within the window;
	// pending are those Redis had not applied at t2.
	ops, pending []sqlstock.Op
	// inFlight, returning and restocking are the in-transit units (see
	// Correction); target = rec.Available - inFlight + returning -
	// restocking, never below 0.
	inFlight, returning, restocking, target int64
	stale                                   bool  // the SKU moved between the reads: read it again
	err                                     error // the SKU cannot be computed
}

// examine reads the SKUs from both sides in the order the package doc
// explains, and computes each one's target:
//
//	t0  Redis: each SKU's fence
//	t1  database, one consistent view: the stock rows, the held lines and
//	    the restocks of the window
//	t2  Redis: each SKU's count and fence, its holds, the Redis state of
//	    the database's held lines and whether Redis applied those
//	    restocks, atomically per SKU
//	t3  the same database view (still as of t1): the state of the orders
//	    Redis holds that the database did not list as held
func (r *Reconciler) examine(ctx context.Context, skus []string) ([]finding, error) {
	pre, err := r.gate.Inspect(ctx, skus)
	if err != nil {
		return nil, fmt.Errorf("reconcile: read Redis fences: %w", err)
	}
	view, err := r.record.View(ctx)
	if err != nil {
		return nil, fmt.Errorf("reconcile: open a database view: %w", err)
	}
	defer view.Close()
	levels, err := view.Levels(ctx, skus)
	if err != nil {
		return nil, fmt.Errorf("reconcile: read the stock rows: %w", err)
	}
	lines, err := view.HeldLines(ctx, skus)
	if err != nil {
		return nil, fmt.Errorf("reconcile: read the held ledger lines: %w", err)
	}
	since := r.cfg.Clock.Now().Add(-r.cfg.RestockWindow).UnixMilli()
	restocks, err := view.Restocks(ctx, skus, since)
	if err != nil {
		return nil, fmt.Errorf("reconcile: read the restocks: %w", err)
	}
	ops := make(map[string][]sqlstock.Op, len(restocks))
	for _, op := range restocks {
		ops[op.SKU] = append(ops[op.SKU], op)
	}
	held := make(map[string][]sqlstock.Line, len(lines))
	inDB := make(lineSet, len(lines))
	for _, l := range lines {
		held[l.SKU] = append(held[l.SKU], l)
		inDB[lineKey{l.SKU, l.OrderID}] = true
	}
	reqs := make([]redisstock.SnapshotRequest, len(skus))
	for i, sku := range skus {
		reqs[i].SKU = sku
		for _, l := range held[sku] {
			reqs[i].Orders = append(reqs[i].Orders, l.OrderID)
		}
		for _, op := range ops[sku] {
			reqs[i].Ops = append(reqs[i].Ops, op.ID)
		}
	}
	snaps, err := r.gate.Snapshot(ctx, reqs)
	if err != nil {
		return nil, fmt.Errorf("reconcile: read Redis: %w", err)
	}
	states, err := r.recordStates(ctx, view, snaps, inDB)
	if err != nil {
		return nil, err
	}
	out := make([]finding, len(skus))
	for i, sku := range skus {
		f := &out[i]
		f.sku, f.fence, f.gate, f.rec, f.ops = sku, pre[i].Fence, snaps[i], levels[i], ops[sku]
		f.stale = snaps[i].Fence != pre[i].Fence
		// A hold whose line record is gone (a flush or a hand-deleted key)
		// will never be returned by Redis: its units are not in flight,
		// so Snapshot's Holds leaving it out is what the target needs.
		f.compute(held[sku], inDB, states)
	}
	return out, nil
}

// recordStates returns, as of the view's instant, the state of every order
// Redis holds that the view did not list as held for that SKU.
func (r *Reconciler) recordStates(ctx context.Context, view *sqlstock.View, snaps []redisstock.Snapshot,
	inDB lineSet) (map[string]stock.State, error) {
	var ask []string
	seen := map[string]bool{}
	for _, sn := range snaps {
		for _, h := range sn.Holds {
			if !seen[h.OrderID] && !inDB[lineKey{sn.SKU, h.OrderID}] {
				seen[h.OrderID] = true
				ask = append(ask, h.OrderID)
			}
		}
	}
	states := make(map[string]stock.State, len(ask))
	if len(ask) == 0 {
		return states, nil
	}
	infos, err := view.Orders(ctx, ask)
	if err != nil {
		return nil, fmt.Errorf("reconcile: read order states: %w", err)
	}
	for _, o := range infos {
		states[o.ID] = o.State
	}
	return states, nil
}

// lineKey names one order line: the SKU and the order.
type lineKey struct{ sku, order string }

// lineSet is the set of lines the database held at t1.
type lineSet map[lineKey]bool

// compute sets f's in-transit units and target from the lines the
// database held at t1 and the other orders' states at t1.
func (f *finding) compute(dbHeld []sqlstock.Line, inDB lineSet, states map[string]stock.State) {
	for _, h := range f.gate.Holds {
		if inDB[lineKey{f.sku, h.OrderID}] || states[h.OrderID] == stock.StateConfirmed {
			continue // both sides count it
		}
		f.inFlight += h.Qty // not recorded yet, or already returned there
	}
	for i, l := range dbHeld {
		switch f.gate.Lines[i] {
		case stock.StateReverted, stock.StateRefunded, stock.StateExpired:
			f.returning += l.Qty // Redis returned it; the database will
		}
	}
	// A restock the database applied and Redis has not is on its way
	// (a state Redis lost has none of them: a rebuild counts them all).
	for i, op := range f.ops {
		if f.gate.Exists && !f.gate.OpsApplied[i] {
			f.pending = append(f.pending, op)
			f.restocking += op.Units
		}
	}
	f.target = max(0, f.rec.Available-f.inFlight+f.returning-f.restocking)
}

// needsCorrection reports whether f is a readable SKU on sale on both
// sides that Redis disagrees about.
func (f *finding) needsCorrection() bool {
	return !f.stale && f.err == nil && f.gate.Exists && f.rec.Exists && f.delta() != 0
}

// delta is the correction Redis needs.
func (f *finding) delta() int64 { return f.target - f.gate.Available }

func (f *finding) correction(a Action, err error) Correction {
	return Correction{SKU: f.sku, Action: a, Before: f.gate.Available, After: f.target, Delta: f.delta(),
		Record: f.rec.Available, InFlight: f.inFlight, Returning: f.returning, Restocking: f.restocking, Err: err}
}

// unresolved wraps ErrUnresolved with a count.
func unresolved(n int) error {
	return fmt.Errorf("%w: %d SKUs", ErrUnresolved, n)
}

var errNotInRecord = errors.New("reconcile: SKU is on sale in Redis but has no row in the database")
