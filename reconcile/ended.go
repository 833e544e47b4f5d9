package reconcile

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/stockguard/stockguard/stock"
)

// endAtGate ends at the gate the orders of the gate holds that the
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
// keeps its units from sale at the gate until its deadline.
//
// Each end is the gate's RevertHeld (stock.HoldReverter): the order's
// units and quota go back, and it ends expired, only while the gate still
// holds it, in one step; a Confirm or a repeat Deduct then answers
// stock.ErrHoldExpired, as the reclaimer's end at the deadline would. An
// order the gate no longer holds is left as it is: one a late Confirm
// confirmed at the gate since the reading (its sale is the gate's, which
// a correction reads as drift), or one another pass or the flow ended
// meanwhile. Only an order RevertHeld found held counts as ended, so two
// passes (or a pass and the flow) ending the same order report it once.
//
// Only the SKUs may allows are handled (the caller reads them again
// after). With dry nothing is ended. It returns, per SKU, the units of
// its holds it ended (with dry, those it would): the SKU's reading
// predates the ends. A RevertHeld that fails for want of Redis is an
// error, returned with the ends already made (each one final and right),
// which the caller reports; a business answer leaves the hold to the next
// reading.
//
// It costs one gate call per order ended; the reading costs one
// statement per 1000 orders of gate holds the record does not hold, in
// its view of t1 (none when there are none), and each SKU it ended
// orders of is read again.
func (r *Reconciler) endAtGate(ctx context.Context, fs []finding, dry bool, may func(sku string) bool) (map[string]int64, error) {
	done := map[string]bool{} // orders ended (or, in a dry run, to be)
	tried := map[string]bool{}
	var failed error
	for i := range fs {
		f := &fs[i]
		if failed != nil {
			break
		}
		if f.stale || f.err != nil || !f.gate.Exists || !f.rec.Exists || !may(f.sku) {
			continue
		}
		for _, h := range f.ended {
			if tried[h.OrderID] {
				continue
			}
			tried[h.OrderID] = true
			if !dry {
				found, err := r.gate.RevertHeld(ctx, h.OrderID)
				if err != nil && !stock.IsBusiness(err) {
					failed = fmt.Errorf("reconcile: end order %q at Redis as the record returned it: %w", h.OrderID, err)
					break
				}
				if err != nil || found != stock.StateHeld {
					continue
				}
			}
			done[h.OrderID] = true
		}
	}
	if len(done) == 0 {
		return nil, failed
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
	return out, failed
}

// noteUnreported reports, for a pass stopping on err, the ends it made
// (ended: units per SKU) that no entry of rep reported yet: a SKU not read
// again after them. Each is ActionFailed with err, its figures left zero.
// An end is final at the gate, and no later pass finds it to report.
func (r *Reconciler) noteUnreported(rep *Report, ended map[string]int64, err error) {
	told := map[string]int64{}
	for _, c := range rep.Corrections {
		told[c.SKU] += c.Ended
	}
	for _, sku := range slices.Sorted(maps.Keys(ended)) {
		if n := ended[sku] - told[sku]; n > 0 {
			r.note(rep, Correction{SKU: sku, Action: ActionFailed, Ended: n,
				Err: fmt.Errorf("reconcile: SKU %q: not read again after the pass ended holds of it: %w", sku, err)})
		}
	}
}
