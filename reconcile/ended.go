package reconcile

import (
	"context"
	"fmt"

	"github.com/stockguard/stockguard/stock"
)

// endAtGate reverts at the gate the orders of the gate holds that the
// reading found returned at the record (finding.ended, read by endedAt1
// in the view of t1, counted in flight): reverted, refunded or expired
// there. Such a hold is no order in flight but one whose end the gate
// missed: an order cancelled at the record alone (a node whose breaker
// kept traffic off Redis), or taken again by a repeat Deduct at a gate
// that lost it, which the flow then ends the same way. Counted in flight,
// it would keep its units (and its user's quota) from sale at the gate
// until its deadline. An order the record did not know at t1, or held,
// stays in flight: its Deduct may be between the tiers. So does one the
// record confirmed: the gate cannot tell that order's own hold from a
// copy a retry past the gate's Retention took again, and confirming a
// copy would count its user's units twice at the gate for good; the hold
// keeps its units from sale at the gate until its deadline. A Revert is
// exactly once at the gate, so two passes (or a pass and the flow)
// ending the same order end it once.
//
// Only the SKUs may allows are handled (the caller reads them again
// after). With dry nothing is reverted. It returns, per SKU, the units of
// its holds it reverted (with dry, those it would): the SKU's reading
// predates the ends. A Revert that fails for want of Redis is an error,
// after the ends already made (each one final and right); a business
// answer (the order ended at the gate meanwhile, or the gate lost it)
// leaves the hold to the next reading.
//
// It costs one gate call per order reverted; the reading costs one
// statement per 1000 orders of gate holds the record does not hold, in
// its view of t1 (none when there are none), and each SKU it reverted
// orders of is read again.
func (r *Reconciler) endAtGate(ctx context.Context, fs []finding, dry bool, may func(sku string) bool) (map[string]int64, error) {
	done := map[string]bool{} // orders reverted (or, in a dry run, to be)
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
				if err := r.gate.Revert(ctx, h.OrderID); err != nil {
					if stock.IsBusiness(err) {
						continue
					}
					return nil, fmt.Errorf("reconcile: revert order %q at Redis as the record returned it: %w", h.OrderID, err)
				}
			}
			done[h.OrderID] = true
		}
	}
	if len(done) == 0 {
		return nil, nil
	}
	out := map[string]int64{}
	for i := range fs {
		f := &fs[i]
		for _, h := range f.ended {
			if done[h.OrderID] {
				out[f.sku] += h.Qty
			}
		}
	}
	return out, nil
}
