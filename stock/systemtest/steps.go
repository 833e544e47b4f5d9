package systemtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// randomStep takes one step of the run, chosen by the seed.
func (r *runner) randomStep() {
	if len(r.parked) > 0 && r.rng.IntN(5) == 0 {
		r.resume()
		return
	}
	x := r.rng.IntN(100)
	switch {
	case x < 20:
		r.buy()
	case x < 24:
		if !r.partialReturn() {
			r.buy()
		}
	case x < 28:
		if !r.extend() {
			r.buy()
		}
	case x < 40:
		if !r.pay() {
			r.buy()
		}
	case x < 47:
		if !r.cancel() {
			r.tick()
		}
	case x < 56:
		if !r.retry() {
			r.buy()
		}
	case x < 68:
		r.tick()
	case x < 79:
		r.reclaim()
	case x < 88:
		r.repair()
	case x < 93:
		r.restock()
	case x < 96 && r.cfg.Flush != nil:
		r.flush()
	case x < 97 && r.cfg.Restart != nil:
		r.restart()
	default:
		if !r.resume() {
			r.tick()
		}
	}
}

func (r *runner) node() int { return r.rng.IntN(len(r.flows)) }

// buy places a new order: one to three SKUs, one or two units each.
func (r *runner) buy() {
	var items []stock.Item
	n := 1 + r.rng.IntN(min(3, len(r.skus)))
	for _, i := range r.rng.Perm(len(r.skus))[:n] {
		items = append(items, stock.Item{SKU: r.skus[i], Qty: 1 + int64(r.rng.IntN(2))})
	}
	r.newOrder(fmt.Sprintf("u%d", r.rng.IntN(r.cfg.Users)), items, r.node())
}

// newOrder books a new order and sends its Deduct.
func (r *runner) newOrder(user string, items []stock.Item, node int) {
	r.nextID++
	o := &order{id: fmt.Sprintf("o%d", r.nextID), user: user, items: slices.Clone(items), scripted: r.forced != nil}
	for _, it := range items {
		l := r.listing[it.SKU]
		if h := l.EffectiveHoldTTL(); o.hold == 0 || h < o.hold {
			o.hold = h
		}
		if m := l.EffectiveMaxHoldTTL(); o.maxHold == 0 || m < o.maxHold {
			o.maxHold = m
		}
	}
	if r.cfg.Script == nil && !r.cfg.NoPartial && r.rng.IntN(4) == 0 {
		// An order with its own hold time, up to its SKUs' maximum.
		o.own = time.Duration(1+r.rng.Int64N(o.maxHold.Milliseconds())) * time.Millisecond
		o.hold = o.own
	}
	slices.SortFunc(o.items, func(a, b stock.Item) int { return strings.Compare(a.SKU, b.SKU) })
	o.firstSent = r.now()
	r.orders = append(r.orders, o)
	r.res.Counts["orders"]++
	r.deduct(o, node)
}

func (r *runner) deduct(o *order, node int) {
	c := &call{kind: "deduct", node: node, o: o, ctl: r.pickFault(deductFaults)}
	c.desc = fmt.Sprintf("n%d deduct %v", node, o)
	r.line += " " + c.desc + faultText(c.ctl)
	o.attempts++
	so := o.stockOrder()
	r.launch(c, func(ctx context.Context) result { return result{err: r.flows[node].Deduct(ctx, so)} })
}

// pick returns a random order for which ok holds, or nil.
func (r *runner) pick(ok func(o *order) bool) *order {
	var cand []*order
	for _, o := range r.orders {
		if ok(o) {
			cand = append(cand, o)
		}
	}
	if len(cand) == 0 {
		return nil
	}
	return cand[r.rng.IntN(len(cand))]
}

// pay confirms an order that was told yes.
func (r *runner) pay() bool {
	o := r.pick(func(o *order) bool { return o.yes && !o.paid && !o.revertSent && !o.doubtful() && o.parked == 0 })
	if o == nil {
		return false
	}
	r.confirm(o, r.node())
	return true
}

func (r *runner) confirm(o *order, node int) {
	c := &call{kind: "confirm", node: node, o: o, ctl: r.pickFault(flowFaults)}
	c.desc = fmt.Sprintf("n%d confirm %s", node, o.id)
	r.line += " " + c.desc + faultText(c.ctl)
	r.launch(c, func(ctx context.Context) result { return result{err: r.flows[node].Confirm(ctx, o.id)} })
}

// cancel reverts an order told yes (a refund once it is paid).
func (r *runner) cancel() bool {
	o := r.pick(func(o *order) bool { return o.yes && !o.reverted && o.parked == 0 })
	if o == nil {
		return false
	}
	r.revert(o, r.node())
	return true
}

func (r *runner) revert(o *order, node int) {
	c := &call{kind: "revert", node: node, o: o, ctl: r.pickFault(flowFaults)}
	c.desc = fmt.Sprintf("n%d revert %s", node, o.id)
	r.line += " " + c.desc + faultText(c.ctl)
	o.revertSent = true
	r.launch(c, func(ctx context.Context) result { return result{err: r.flows[node].Revert(ctx, o.id)} })
}

// retry repeats a call whose answer was lost with the same IDs, on a
// random node, as the contract tells callers to; now and then it repeats
// a Deduct already told yes (a redelivered message).
func (r *runner) retry() bool {
	if rs := r.pickRestock(); rs != nil && r.rng.IntN(2) == 0 {
		r.sendRestock(rs)
		return true
	}
	o := r.pick(func(o *order) bool { return o.doubtful() && o.parked == 0 })
	if o == nil || r.rng.IntN(5) == 0 {
		o = r.pick(func(o *order) bool { return o.yes && o.parked == 0 })
		if o == nil {
			return false
		}
		r.deduct(o, r.node())
		return true
	}
	switch {
	case o.doubt["revert"]:
		r.revert(o, r.node())
	case o.doubt["confirm"]:
		r.confirm(o, r.node())
	case o.doubt["return"] && o.ret != nil:
		r.revertItems(o, *o.ret, r.node())
	case o.doubt["extend"] && !o.ext.IsZero():
		r.extendTo(o, o.ext, r.node())
	default:
		r.deduct(o, r.node())
	}
	return true
}

func (r *runner) pickRestock() *restockOp {
	var cand []*restockOp
	for _, rs := range r.restocks {
		if !rs.ok && !rs.refused && rs.parked == 0 {
			cand = append(cand, rs)
		}
	}
	if len(cand) == 0 {
		return nil
	}
	return cand[r.rng.IntN(len(cand))]
}

// tick moves the clock forward by up to Config.MaxTick.
func (r *runner) tick() {
	d := time.Duration(r.rng.Int64N(int64(r.cfg.MaxTick))) + time.Millisecond
	r.cfg.Clock.Advance(d)
	r.line += fmt.Sprintf(" tick +%v", d.Round(time.Millisecond))
}

// reclaim runs one node's reclaimer once.
func (r *runner) reclaim() { r.reclaimOn(r.node()) }

func (r *runner) reclaimOn(node int) {
	c := &call{kind: "reclaim", node: node, ctl: r.pickFault(flowFaults)}
	c.desc = fmt.Sprintf("n%d reclaim", node)
	r.line += " " + c.desc + faultText(c.ctl)
	r.res.Counts["reclaims"]++
	r.launch(c, func(ctx context.Context) result {
		got, err := r.flows[node].ReclaimExpired(ctx, reclaimLimit)
		return result{err: err, got: got}
	})
}

// repair runs one reconciliation pass over every SKU.
func (r *runner) repair() { r.repairOf(nil) }

// repairOf runs a reconciliation pass over skus (nil: every SKU).
func (r *runner) repairOf(skus []string) {
	if skus == nil {
		skus = slices.Clone(r.skus)
	}
	c := &call{kind: "repair", node: -1, ctl: r.pickFault(repairFaults)}
	c.desc = "repair"
	if len(skus) < len(r.skus) {
		c.desc += fmt.Sprint(skus)
	}
	r.line += " " + c.desc + faultText(c.ctl)
	r.res.Counts["repairs"]++
	r.launch(c, func(ctx context.Context) result { return result{err: r.cfg.Repair(ctx, skus)} })
}

// restock adds one to five units to a SKU under a new operation ID.
func (r *runner) restock() {
	r.nextID++
	rs := &restockOp{r: stock.Restock{OpID: fmt.Sprintf("op%d", r.nextID), SKU: r.skus[r.rng.IntN(len(r.skus))], Units: 1 + r.rng.Int64N(5)}}
	r.restocks = append(r.restocks, rs)
	r.res.Counts["restocks"]++
	r.sendRestock(rs)
}

func (r *runner) sendRestock(rs *restockOp) { r.sendRestockOn(rs, r.node()) }

func (r *runner) sendRestockOn(rs *restockOp, node int) {
	c := &call{kind: "restock", node: node, rs: rs, ctl: r.pickFault(flowFaults)}
	c.desc = fmt.Sprintf("n%d restock %s %s+%d", node, rs.r.OpID, rs.r.SKU, rs.r.Units)
	r.line += " " + c.desc + faultText(c.ctl)
	rs.sent = true
	x := rs.r
	r.launch(c, func(ctx context.Context) result { return result{err: r.flows[node].Restock(ctx, x)} })
}

// flush makes the gate lose its data.
func (r *runner) flush() {
	r.res.Counts["flushes"]++
	err := r.cfg.Flush(r.ctx)
	r.line += " flush → " + errText(err)
}

// restart restarts the gate's server without persistence.
func (r *runner) restart() {
	r.res.Counts["restarts"]++
	err := r.cfg.Restart(r.ctx)
	r.line += " restart → " + errText(err)
}

// resume lets a parked call go on, or (one time in four) its node die.
func (r *runner) resume() bool {
	if len(r.parked) == 0 {
		return false
	}
	r.resumeCall(r.rng.IntN(len(r.parked)), r.rng.IntN(4) != 0)
	return true
}
