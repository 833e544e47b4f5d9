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
	// Correction); read = rec.Available - inFlight + returning -
	// restocking, never below 0, and target is read, or less where a
	// second view of the database proves less (clip).
	inFlight, returning, restocking, read, target int64
	stale                                         bool  // the SKU moved between the reads: read it again
	err                                           error // the SKU cannot be computed
	settings                                      bool  // the correction also gave the gate the record's settings
	// ended are the gate's holds, counted in inFlight, whose orders the
	// database had returned at t1 (see endAtGate).
	ended []redisstock.Hold
	// endedUnits are the units of the SKU's gate holds the pass ended in
	// its earlier readings (Correction.Ended).
	endedUnits int64
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
//
// examineBounded reads the database again after t2 (t3, a second view).
// Orders that move between the readings make the reading of t1 and t2
// count too many units only for an order recorded after t1 and confirmed
// at the gate before t2 (sold in Redis, unknown to the view of t1), and
// the reading of t2 and t3 too many only for an order sold at the gate at
// t2 and refunded at both tiers before t3; it counts too few for any
// order taken at the gate after t2 and recorded before t3. A target above
// what Redis has is the lower of the two (see finding.clip): an order
// between t1 and t2 no longer raises Redis.
func (r *Reconciler) examine(ctx context.Context, skus []string) ([]finding, error) {
	return r.reading(ctx, skus, false)
}

// examineBounded is examine with the second view of the database (t3).
func (r *Reconciler) examineBounded(ctx context.Context, skus []string) ([]finding, error) {
	return r.reading(ctx, skus, true)
}

func (r *Reconciler) reading(ctx context.Context, skus []string, bound bool) ([]finding, error) {
	pre, err := r.gate.Inspect(ctx, skus)
	if err != nil {
		return nil, fmt.Errorf("reconcile: read Redis fences: %w", err)
	}
	claims, err := r.claim(ctx, pre)
	if err != nil {
		return nil, err
	}
	since := r.cfg.Clock.Now().Add(-r.cfg.RestockWindow).UnixMilli()
	at1, view, err := r.readRecord(ctx, skus, since)
	if err != nil {
		return nil, err
	}
	defer view.Close() // kept open for endedAt1, after the gate's reading
	reqs := make([]redisstock.SnapshotRequest, len(skus))
	for i, sku := range skus {
		reqs[i].SKU = sku
		for _, l := range at1.held[sku] {
			reqs[i].Orders = append(reqs[i].Orders, l.OrderID)
		}
		for _, op := range at1.ops[sku] {
			reqs[i].Ops = append(reqs[i].Ops, op.ID)
		}
	}
	snaps, err := r.gate.Snapshot(ctx, reqs)
	if err != nil {
		return nil, fmt.Errorf("reconcile: read Redis: %w", err)
	}
	ended, err := endedAt1(ctx, view, skus, snaps, at1.inDB)
	if err != nil {
		return nil, err
	}
	var at3 *recordRead
	if bound {
		var v3 *sqlstock.View
		if at3, v3, err = r.readRecord(ctx, skus, since); err != nil {
			return nil, err
		}
		v3.Close()
	}
	out := make([]finding, len(skus))
	for i, sku := range skus {
		f := &out[i]
		f.sku, f.fence, f.gate, f.rec, f.ops = sku, pre[i].Fence, snaps[i], at1.levels[i], at1.ops[sku]
		f.claim = claims[sku]
		f.stale = snaps[i].Fence != pre[i].Fence
		// A hold whose line record is gone (a flush or a hand-deleted key)
		// will never be returned by Redis: its units are not in flight,
		// so Snapshot's Holds leaving it out is what the target needs.
		f.compute(at1.held[sku], at1.inDB, ended)
		if at3 != nil {
			f.clip(at1.held[sku], at3.levels[i], at3.held[sku], at3.inDB, at3.ops[sku])
		}
	}
	return out, nil
}

// recordRead is what one consistent view of the database said of a batch.
type recordRead struct {
	levels []sqlstock.SKULevels       // in the batch's order
	held   map[string][]sqlstock.Line // by SKU
	inDB   lineSet                    // the held lines
	ops    map[string][]sqlstock.Op   // restocks of the window, by SKU
}

// readRecord reads the SKUs' rows, held lines and restocks applied since
// (Unix ms) in one consistent view of the database, and returns the view
// open, for the caller to close.
func (r *Reconciler) readRecord(ctx context.Context, skus []string, since int64) (_ *recordRead, _ *sqlstock.View, err error) {
	view, err := r.record.View(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("reconcile: open a database view: %w", err)
	}
	defer func() {
		if err != nil {
			view.Close()
		}
	}()
	levels, err := view.Levels(ctx, skus)
	if err != nil {
		return nil, nil, fmt.Errorf("reconcile: read the stock rows: %w", err)
	}
	lines, err := view.HeldLines(ctx, skus)
	if err != nil {
		return nil, nil, fmt.Errorf("reconcile: read the held ledger lines: %w", err)
	}
	restocks, err := view.Restocks(ctx, skus, since)
	if err != nil {
		return nil, nil, fmt.Errorf("reconcile: read the restocks: %w", err)
	}
	rd := &recordRead{levels: levels, held: make(map[string][]sqlstock.Line, len(skus)),
		inDB: make(lineSet, len(lines)), ops: make(map[string][]sqlstock.Op, len(restocks))}
	for _, op := range restocks {
		rd.ops[op.SKU] = append(rd.ops[op.SKU], op)
	}
	for _, l := range lines {
		rd.held[l.SKU] = append(rd.held[l.SKU], l)
		rd.inDB[lineKey{l.SKU, l.OrderID}] = l.Qty
	}
	return rd, view, nil
}

// endedAt1 reads, in the view of t1, the orders of the gate's holds at t2
// (snaps) that the view did not hold (inDB), and returns those it had
// returned: reverted, refunded or expired. Every step of the flow ends an
// order at the gate before the record (stock/tiered), so a hold the gate
// still had at t2 of an order the record had returned by t1 is one the
// gate missed the end of (see endAtGate), never one a flow is ending,
// provided the hold is that order: a gate past its Retention may hold
// another order under the same ID (see matches). An order the record
// confirmed is not returned: its hold stays in flight (see endAtGate).
// One statement per 1000 such orders, none when the gate holds nothing
// the record does not.
func endedAt1(ctx context.Context, view *sqlstock.View, skus []string, snaps []redisstock.Snapshot, inDB lineSet) (map[string]stock.OrderInfo, error) {
	var ids []string
	asked := map[string]bool{}
	for i, sku := range skus {
		for _, h := range snaps[i].Holds {
			if _, held := inDB[lineKey{sku, h.OrderID}]; !held && !asked[h.OrderID] {
				asked[h.OrderID] = true
				ids = append(ids, h.OrderID)
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	ins, err := view.Orders(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("reconcile: read the orders of Redis's holds: %w", err)
	}
	var out map[string]stock.OrderInfo
	for _, in := range ins {
		switch in.State {
		case stock.StateReverted, stock.StateRefunded, stock.StateExpired:
			if out == nil {
				out = map[string]stock.OrderInfo{}
			}
			out[in.ID] = in
		}
	}
	// An order any of whose gate holds is not the record's order is left
	// in flight on every SKU.
	for i := range skus {
		for _, h := range snaps[i].Holds {
			if in, ok := out[h.OrderID]; ok && !matches(skus[i], h, in) {
				delete(out, h.OrderID)
			}
		}
	}
	return out, nil
}

// matches reports whether gate hold h of sku is a hold of the record's
// order in: the same user, and on sku what the order's line still takes (its
// units less what partial reverts returned). A gate that forgot an order
// past its Retention may hold another order under its ID (another user,
// or another count, which the record refuses as a conflict when its step
// comes); that hold is no end the gate missed.
func matches(sku string, h redisstock.Hold, in stock.OrderInfo) bool {
	if h.UserID != in.UserID {
		return false
	}
	var qty int64
	found := false
	for _, it := range in.Items {
		if it.SKU == sku {
			qty += it.Qty
			found = true
		}
	}
	for _, it := range in.Returned {
		if it.SKU == sku {
			qty -= it.Qty
		}
	}
	return found && qty == h.Qty
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

// lineSet is the set of lines the database held at a view, with what each
// still held (its units less what partial reverts gave back).
type lineSet map[lineKey]int64

// compute sets f's in-transit units and target from the lines the
// database held at t1; ended are the orders it had ended (endedAt1).
func (f *finding) compute(dbHeld []sqlstock.Line, inDB lineSet, ended map[string]stock.OrderInfo) {
	// A hold Redis has for an order the database has ended (returned or
	// sold) is in flight too, not counted by both. One of an order the
	// database returned is listed in f.ended: the pass reverts it at Redis
	// and reads the SKU again (endAtGate). Until then (a dry run), and for
	// one the database sold, counting it once errs on the safe side: Redis
	// is corrected down, never above what the database can take, and the
	// hold's units come back at its deadline at Redis (the next pass
	// finds the tiers agreeing).
	//
	// Both sides count what is left of a line after partial reverts. A
	// partial revert lands at the gate first (stock/tiered), so a held
	// line the gate holds less of than the database is returning by the
	// difference; one the gate holds more of (given back at the database
	// alone, by a fallback) is in flight by the difference. A line a
	// partial revert emptied at the gate alone is not in Holds while the
	// order is held there: it is not counted as returning (the pass errs
	// low, and the next one, after the database caught up, raises Redis
	// again). A refund of a confirmed order in flight between the tiers
	// (no held line on either side) errs low the same way.
	gateHeld := make(map[string]int64, len(f.gate.Holds))
	for _, h := range f.gate.Holds {
		gateHeld[h.OrderID] = h.Qty
		q, both := inDB[lineKey{f.sku, h.OrderID}]
		switch {
		case !both:
			f.inFlight += h.Qty // not recorded yet, or ended there
			if _, ok := ended[h.OrderID]; ok {
				f.ended = append(f.ended, h)
			}
		case h.Qty > q:
			f.inFlight += h.Qty - q // given back at the database alone
		}
	}
	for i, l := range dbHeld {
		switch f.gate.Lines[i] {
		case stock.StateReverted, stock.StateRefunded, stock.StateExpired:
			f.returning += l.Qty // Redis returned it; the database will
		case stock.StateHeld:
			if q, ok := gateHeld[l.OrderID]; ok && q < l.Qty {
				f.returning += l.Qty - q // given back at Redis; the database will
			}
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
	f.read = max(0, f.rec.Available-f.inFlight+f.returning-f.restocking)
	f.target = f.read
}

// clip lowers a target above what Redis has to the one that the Redis
// reading of t2 and the database's view of t3 give, when that is lower;
// held1 are the held lines of the view of t1, whose Redis states f.gate
// has. In that reading an order sold in Redis by t2 and recorded after t1
// is held or sold in the view of t3 too: both sides count it, as they
// must. Its terms are taken so that it errs low: a hold Redis had at t2
// that the view of t3 does not hold is in flight, whatever the view says
// of it; a line the view of t3 holds is returning only if Redis said at t2
// that it returned it (Redis was not asked about lines recorded after t1);
// a restock of the window Redis did not report applied is on its way, one
// newer than t1 included (had it reached Redis by t2 it would have moved
// the fence, and the SKU would be stale).
func (f *finding) clip(held1 []sqlstock.Line, rec3 sqlstock.SKULevels, held3 []sqlstock.Line, in3 lineSet, ops3 []sqlstock.Op) {
	if !f.gate.Exists || f.target <= f.gate.Available {
		return
	}
	seen := make(map[string]stock.State, len(held1))
	for i, l := range held1 {
		seen[l.OrderID] = f.gate.Lines[i]
	}
	var inFlight, returning, restocking int64
	gateHeld := make(map[string]int64, len(f.gate.Holds))
	for _, h := range f.gate.Holds {
		gateHeld[h.OrderID] = h.Qty
		q, both := in3[lineKey{f.sku, h.OrderID}]
		switch {
		case !both:
			inFlight += h.Qty
		case h.Qty > q:
			inFlight += h.Qty - q
		}
	}
	for _, l := range held3 {
		switch seen[l.OrderID] {
		case stock.StateReverted, stock.StateRefunded, stock.StateExpired:
			returning += l.Qty
		case stock.StateHeld:
			if q, ok := gateHeld[l.OrderID]; ok && q < l.Qty {
				returning += l.Qty - q
			}
		}
	}
	applied := make(map[string]bool, len(f.ops))
	for i, op := range f.ops {
		applied[op.ID] = f.gate.OpsApplied[i]
	}
	for _, op := range ops3 {
		if !applied[op.ID] {
			restocking += op.Units
		}
	}
	low := int64(0)
	if rec3.Exists {
		low = max(0, rec3.Available-inFlight+returning-restocking)
	}
	f.target = max(f.gate.Available, min(f.target, low))
}

// needsCorrection reports whether f is a readable SKU on sale on both
// sides that Redis disagrees about.
func (f *finding) needsCorrection() bool {
	return !f.stale && f.err == nil && f.gate.Exists && f.rec.Exists && f.delta() != 0
}

// delta is the correction Redis needs.
func (f *finding) delta() int64 { return f.target - f.gate.Available }

// readDelta is the correction the reading of t1 and t2 alone computes.
func (f *finding) readDelta() int64 { return f.read - f.gate.Available }

func (f *finding) correction(a Action, err error) Correction {
	return Correction{SKU: f.sku, Action: a, Before: f.gate.Available, After: f.target, Delta: f.delta(),
		Record: f.rec.Available, InFlight: f.inFlight, Returning: f.returning, Restocking: f.restocking,
		Settings: f.settings, Ended: f.endedUnits, Err: err}
}

// unresolved wraps ErrUnresolved with a count.
func unresolved(n int) error {
	return fmt.Errorf("%w: %d SKUs", ErrUnresolved, n)
}

var errNotInRecord = errors.New("reconcile: SKU is on sale in Redis but has no row in the database")
