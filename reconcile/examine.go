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
	// claim is the rebuild claim taken before the database was read, for
	// a SKU Redis had no state for ("" otherwise, and in a dry run).
	claim string
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
func (r *Reconciler) examine(ctx context.Context, skus []string) ([]finding, error) {
	pre, err := r.gate.Inspect(ctx, skus)
	if err != nil {
		return nil, fmt.Errorf("reconcile: read Redis fences: %w", err)
	}
	claims, err := r.claim(ctx, pre)
	if err != nil {
		return nil, err
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
	out := make([]finding, len(skus))
	for i, sku := range skus {
		f := &out[i]
		f.sku, f.fence, f.gate, f.rec, f.ops = sku, pre[i].Fence, snaps[i], levels[i], ops[sku]
		f.claim = claims[sku]
		f.stale = snaps[i].Fence != pre[i].Fence
		// A hold whose line record is gone (a flush or a hand-deleted key)
		// will never be returned by Redis: its units are not in flight,
		// so Snapshot's Holds leaving it out is what the target needs.
		f.compute(held[sku], inDB)
	}
	return out, nil
}

// claim takes a rebuild claim on every SKU the gate had no state for at
// t0, before the database is read (none in a dry run): a rebuild computed
// from this reading is then refused if the SKU's state was created (and
// perhaps sold from and lost again) since.
func (r *Reconciler) claim(ctx context.Context, pre []redisstock.SKUState) (map[string]string, error) {
	if r.cfg.DryRun {
		return nil, nil
	}
	var missing []string
	for _, st := range pre {
		if !st.Exists {
			missing = append(missing, st.SKU)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	tokens, err := r.gate.ClaimRebuild(ctx, missing)
	if err != nil {
		return nil, fmt.Errorf("reconcile: claim rebuilds: %w", err)
	}
	out := make(map[string]string, len(missing))
	for i, sku := range missing {
		out[sku] = tokens[i]
	}
	return out, nil
}

// lineKey names one order line: the SKU and the order.
type lineKey struct{ sku, order string }

// lineSet is the set of lines the database held at t1.
type lineSet map[lineKey]bool

// compute sets f's in-transit units and target from the lines the
// database held at t1.
func (f *finding) compute(dbHeld []sqlstock.Line, inDB lineSet) {
	// A hold Redis has for an order the database has confirmed is in
	// flight too, not counted by both: the database sold the units, and
	// whether Redis counts them is up to that hold, which may end either
	// way (its Confirm lands, or it is returned at its deadline: a hold a
	// gate that lost the order took again on a repeat Deduct, after a
	// rebuild that already counted the sale). Counting it once errs on the
	// safe side: Redis is corrected down, never above what the database can
	// take, and a confirmed hold is brought back by the next pass.
	for _, h := range f.gate.Holds {
		if inDB[lineKey{f.sku, h.OrderID}] {
			continue // both sides count it
		}
		f.inFlight += h.Qty // not recorded yet, returned there, or sold there
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
