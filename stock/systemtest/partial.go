package systemtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// partialReturn gives back part of an order told yes (a partial cancel, or
// a partial refund once it is paid), under a new operation ID: some units
// of one line, up to all of it while another line has units left, so the
// order itself stays held or sold. It is skipped (false) with
// Config.NoPartial or where the flows are not stock.PartialReverters.
func (r *runner) partialReturn() bool {
	if _, ok := r.flows[0].(stock.PartialReverter); !ok || r.cfg.NoPartial {
		return false
	}
	o := r.pick(func(o *order) bool {
		return o.yes && !o.revertSent && !o.doubtful() && o.parked == 0 && o.ret == nil
	})
	if o == nil {
		return false
	}
	// A line may be emptied while another line has units left (the order
	// stays held or sold); the last line left keeps at least one unit.
	var lines []stock.Item
	open := 0
	for _, it := range o.items {
		if o.left(it.SKU) > 0 {
			open++
		}
	}
	for _, it := range o.items {
		n := o.left(it.SKU)
		if open == 1 {
			n--
		}
		if n > 0 {
			lines = append(lines, stock.Item{SKU: it.SKU, Qty: n})
		}
	}
	if len(lines) == 0 {
		return false
	}
	it := lines[r.rng.IntN(len(lines))]
	it.Qty = 1 + r.rng.Int64N(it.Qty)
	r.nextID++
	ret := stock.Return{OpID: fmt.Sprintf("ret%d", r.nextID), OrderID: o.id, Items: []stock.Item{it}}
	o.ret, o.retAgain = &ret, false
	if o.maybe == nil {
		o.maybe, o.returned = map[string]int64{}, map[string]int64{}
	}
	o.maybe[it.SKU] += it.Qty
	r.res.Counts["returns"]++
	r.revertItems(o, ret, r.node())
	return true
}

func (r *runner) revertItems(o *order, ret stock.Return, node int) {
	c := &call{kind: "return", node: node, o: o, ret: ret, ctl: r.pickFault(flowFaults)}
	c.desc = fmt.Sprintf("n%d return %s %s×%d (%s)", node, o.id, ret.Items[0].SKU, ret.Items[0].Qty, ret.OpID)
	r.line += " " + c.desc + faultText(c.ctl)
	f := r.flows[node].(stock.PartialReverter)
	r.launch(c, func(ctx context.Context) result { return result{err: f.RevertItems(ctx, ret)} })
}

// extend moves the deadline of a held order told yes out by up to twice
// the longest tick, never past the order's bound (its first Deduct plus
// the shortest MaxHoldTTL of its SKUs). It is skipped (false) with
// Config.NoPartial or where the flows are not stock.HoldExtenders.
func (r *runner) extend() bool {
	if _, ok := r.flows[0].(stock.HoldExtender); !ok || r.cfg.NoPartial {
		return false
	}
	o := r.pick(func(o *order) bool {
		return o.yes && !o.paid && !o.revertSent && !o.doubtful() && o.parked == 0 && r.now().Before(o.deadlineMin())
	})
	if o == nil {
		return false
	}
	to := r.now().Add(time.Duration(1 + r.rng.Int64N(int64(2*r.cfg.MaxTick)))).Truncate(time.Millisecond)
	if bound := o.firstSent.Add(o.maxHold).Truncate(time.Millisecond); to.After(bound) {
		to = bound
	}
	o.ext = to
	o.extSent = later(o.extSent, to)
	r.res.Counts["extensions"]++
	r.extendTo(o, to, r.node())
	return true
}

func (r *runner) extendTo(o *order, to time.Time, node int) {
	c := &call{kind: "extend", node: node, o: o, ext: to, ctl: r.pickFault(flowFaults)}
	c.desc = fmt.Sprintf("n%d extend %s to %s", node, o.id, to.Format("15:04:05.000"))
	r.line += " " + c.desc + faultText(c.ctl)
	f := r.flows[node].(stock.HoldExtender)
	r.launch(c, func(ctx context.Context) result { return result{err: f.ExtendHold(ctx, o.id, to)} })
}

// finishPartial books the end of a return or an extension: definitive
// says whether the answer was nil or a business error.
func (r *runner) finishPartial(c *call, err error, definitive bool) {
	o := c.o
	switch c.kind {
	case "return":
		switch {
		case !definitive:
			o.retAgain = true
			return
		case err == nil:
			for _, it := range c.ret.Items {
				o.returned[it.SKU] += it.Qty
			}
		case !o.retAgain:
			// Refused on its first answer: no tier gave anything back.
			for _, it := range c.ret.Items {
				o.maybe[it.SKU] -= it.Qty
			}
		}
		o.ret = nil
	case "extend":
		if !definitive {
			return
		}
		if err == nil {
			o.extTold = later(o.extTold, c.ext)
		}
		o.ext = time.Time{}
	}
}

// answeredPartial checks what a definitive answer to a return or an
// extension promises; gate and rec are the tiers' reports of the order.
func (r *runner) answeredPartial(c *call, err error, gate, rec stock.OrderInfo) {
	o := c.o
	switch c.kind {
	case "return":
		switch {
		case err == nil:
			// A held copy past its record deadline gives back everything
			// it has at its reclaim: a return the gate applied in time
			// and the record refused as expired is told nil (see
			// tiered.Manager.RevertItems), its units on their way back.
			ending := rec.State == stock.StateHeld && !r.now().Before(rec.Deadline)
			for _, it := range o.items {
				if rec.State.Takes() && !ending && returnedAt(rec, it.SKU) < o.returned[it.SKU] {
					r.violate(CheckToldYes, "%s was told nil, the record gave back %d of %s, %d were told nil", c.desc,
						returnedAt(rec, it.SKU), it.SKU, o.returned[it.SKU])
				}
			}
		case errors.Is(err, stock.ErrExceedsOrder), errors.Is(err, stock.ErrConflict), errors.Is(err, stock.ErrInvalid):
			r.violate(CheckContract, "%s: %v (each return asks at most what the order has left, under its own OpID)", c.desc, err)
		case errors.Is(err, stock.ErrUnknownOrder) && c.toldYes && rec.State.Takes():
			r.violate(CheckToldYes, "%s: %v, the record has it %v", c.desc, err, rec.State)
		}
	case "extend":
		switch {
		case err == nil:
			for _, t := range []struct {
				name string
				in   stock.OrderInfo
			}{{"gate", gate}, {"record", rec}} {
				if t.in.State == stock.StateHeld && t.in.Deadline.Before(c.ext) {
					r.violate(CheckToldYes, "%s was told nil, the %s holds it until %s", c.desc, t.name, t.in.Deadline.Format("15:04:05.000"))
				}
			}
		case errors.Is(err, stock.ErrHoldTooLong), errors.Is(err, stock.ErrInvalid):
			r.violate(CheckContract, "%s: %v (within the order's bound)", c.desc, err)
		}
	}
}

// checkReturns checks that no tier gave back more of an order than the
// returns sent for it, and none more than the order took.
func (r *runner) checkReturns(v view) {
	for _, o := range r.orders {
		for _, t := range []struct {
			name string
			in   stock.OrderInfo
		}{{"gate", v.gateOrd[o.id]}, {"record", v.recOrd[o.id]}} {
			for _, it := range o.items {
				if n := returnedAt(t.in, it.SKU); n > o.maybe[it.SKU] || n > it.Qty {
					r.violate(CheckExactlyOnce, "%s: the %s gave back %d of %s, %d were asked back", o, t.name, n, it.SKU, o.maybe[it.SKU])
				}
			}
		}
	}
}
