package reconcile

import (
	"context"
	"fmt"

	"github.com/stockguard/stockguard/stock"
)

// endAtGate ends at the gate, the way the record ended it, the orders of
// the gate holds that the reading found ended at the record (finding.ended,
// read by endedAt1 in the view of t1, counted in flight): Revert for one
// reverted, refunded or expired there, Confirm for one confirmed. Such a
// hold is no order in flight but one whose end the gate missed: an order
// closed at the record alone (a node whose breaker kept traffic off
// Redis), or taken again by a repeat Deduct at a gate that lost it, which
// the flow then ends the same way. Counted in flight, it would keep its
// units (and its user's quota) from sale at the gate until its deadline.
// An order the record did not know at t1, or held, stays in flight: its
// Deduct may be between the tiers. Both ends are exactly once at the
// gate, so two passes (or a pass and the flow) ending the same order end
// it once.
//
// Only the SKUs may allows are handled (the caller reads them again
// after). With dry nothing is ended. It notes every SKU with a hold it
// ended (ActionEnded; ActionDryRun with dry; their units in
// Correction.Ended) and returns them: their reading predates the ends.
// A gate end that fails for want of Redis is an error, after the ends
// already made (each one final and right); a business answer (the order
// ended at the gate meanwhile, its hold expired there and its reclaimer
// returns it, or the gate lost it) leaves the hold to the next reading.
//
// It costs one gate call per order ended; the reading costs one
// statement per 1000 orders of gate holds the record does not hold, in
// its view of t1 (none when there are none), and each SKU it ended orders
// of is read again.
func (r *Reconciler) endAtGate(ctx context.Context, rep *Report, fs []finding, dry bool, may func(sku string) bool) (map[string]bool, error) {
	done := map[string]bool{} // orders ended (or, in a dry run, to be)
	tried := map[string]bool{}
	for i := range fs {
		f := &fs[i]
		if f.stale || f.err != nil || !f.gate.Exists || !f.rec.Exists || !may(f.sku) {
			continue
		}
		for _, h := range f.ended {
			if tried[h.OrderID] {
				continue
			}
			tried[h.OrderID] = true
			if !dry {
				if err := r.endOne(ctx, h.OrderID, h.state); err != nil {
					if stock.IsBusiness(err) {
						continue
					}
					return nil, err
				}
			}
			done[h.OrderID] = true
		}
	}
	if len(done) == 0 {
		return nil, nil
	}
	a := ActionEnded
	if dry {
		a = ActionDryRun
	}
	out := map[string]bool{}
	for i := range fs {
		f := &fs[i]
		var units int64
		for _, h := range f.ended {
			if done[h.OrderID] {
				units += h.Qty
			}
		}
		if units == 0 {
			continue
		}
		c := f.correction(a, nil)
		c.Ended = units
		r.note(rep, c)
		out[f.sku] = true
	}
	return out, nil
}

// endOne ends order id at the gate the way the record ended it (st).
func (r *Reconciler) endOne(ctx context.Context, id string, st stock.State) error {
	var err error
	if st == stock.StateConfirmed {
		err = r.gate.Confirm(ctx, id)
	} else {
		err = r.gate.Revert(ctx, id)
	}
	if err != nil && !stock.IsBusiness(err) {
		return fmt.Errorf("reconcile: end order %q at Redis as the record did (%s): %w", id, st, err)
	}
	return err
}
