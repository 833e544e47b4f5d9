package systemtest

import (
	"errors"
	"strconv"

	"github.com/stockguard/stockguard/stock"
)

// finish books the result of a call that returned and checks what its
// answer promises.
func (r *runner) finish(c *call, res result) {
	died := c.ctl.isDead()
	r.lastErr, r.lastGot = res.err, len(res.got)
	out := errText(res.err)
	if died {
		out = "node died"
		if c.ctl.has(nodeDies, redisDies) {
			r.res.Counts["deaths"]++
		}
	}
	r.line += " → " + out
	if p := c.ctl.path(); p != "" {
		r.line += " {" + p + "}"
	}
	if c.kind == "reclaim" && res.err == nil {
		r.line += " " + strconv.Itoa(len(res.got)) + " lines"
	}
	definitive := !died && (res.err == nil || stock.IsBusiness(res.err))
	switch c.kind {
	case "deduct", "confirm", "revert":
		o := c.o
		if c.kind == "deduct" {
			if end := r.now(); end.After(o.lastEnd) {
				o.lastEnd = end
			}
			if c.wasParked {
				o.late = r.step
			}
		}
		// A refused retry does not undo what an abandoned attempt of the
		// order took (on a Redis Cluster, the slot groups it got to, which
		// the reclaimer returns at the deadline): the order stays half-way.
		if !(c.kind == "deduct" && res.err != nil && o.doubt["deduct"]) {
			o.settle(c.kind, definitive)
		}
		if definitive {
			r.answered(c, res.err)
		}
	case "return", "extend":
		c.o.settle(c.kind, definitive)
		r.finishPartial(c, res.err, definitive)
		if definitive {
			r.answered(c, res.err)
		}
	case "restock":
		switch {
		case died:
		case res.err == nil:
			c.rs.ok = true
		case stock.IsBusiness(res.err):
			c.rs.refused = true
			r.violate(CheckContract, "%s: %v (every restock names a SKU on sale with a valid count)", c.desc, res.err)
		}
	case "reclaim":
		// A pass that reached its limit may have stopped between an
		// order's lines, as one that failed may have.
		if definitive && len(res.got) < reclaimLimit {
			r.goodReclaim = max(r.goodReclaim, c.step)
		} else {
			r.badReclaim = max(r.badReclaim, c.step)
		}
		if definitive && res.err == nil && len(res.got) < reclaimLimit && !c.wasParked {
			r.checkDue(c.start)
		}
	case "repair":
		// A pass may leave a SKU unresolved (busy, too large a fix): the
		// state checks say whether anything it left is wrong.
	}
}

// answered checks what a definitive answer to a call about an order
// promises.
func (r *runner) answered(c *call, err error) {
	o := c.o
	info, ok := r.readOne(o.id)
	if !ok {
		return
	}
	gate, rec := info[0], info[1]
	// A call parked across a tick may have met the deadline on its way.
	beforeDue := r.now().Before(o.deadlineMin())
	switch c.kind {
	case "deduct":
		switch {
		case err == nil:
			o.yes = true
			r.res.Counts["yes"]++
			if beforeDue && !rec.State.Takes() {
				r.violate(CheckToldYes, "%s was told nil, the record has it %v", c.desc, rec.State)
			} else if rec.State.Takes() && !sameItems(rec.Items, o.items) {
				r.violate(CheckExactlyOnce, "%s: the record holds lines %v", c.desc, rec.Items)
			}
		case errors.Is(err, stock.ErrUnknownSKU):
			r.violate(CheckContract, "%s: %v, though every SKU is on sale (a gate that lost its data is unavailable, not unknown)", c.desc, err)
		case errors.Is(err, stock.ErrInvalid):
			r.violate(CheckContract, "%s: %v for a valid order", c.desc, err)
		case errors.Is(err, stock.ErrSoldOut), errors.Is(err, stock.ErrLimitReached), errors.Is(err, stock.ErrConflict):
			if c.toldYes && beforeDue {
				r.violate(CheckToldYes, "%s: %v on a repeat of an order told yes (a repeat takes nothing and returns nil)", c.desc, err)
			} else if o.attempts == 1 && o.parked == 0 && (gate.State.Takes() || rec.State.Takes()) {
				r.violate(CheckRefusal, "%s: %v, yet the gate has it %v and the record %v", c.desc, err, gate.State, rec.State)
			}
		case errors.Is(err, stock.ErrHoldExpired), errors.Is(err, stock.ErrOrderClosed):
			if c.toldYes && beforeDue {
				r.violate(CheckToldYes, "%s: %v before the deadline of an order told yes", c.desc, err)
			}
		}
	case "confirm":
		switch {
		case err == nil:
			o.paid = true
			if rec.State != stock.StateConfirmed {
				r.violate(CheckToldYes, "%s was told nil, the record has it %v", c.desc, rec.State)
			}
		case c.toldYes && !o.revertSent && beforeDue && o.parked == 0:
			r.violate(CheckToldYes, "%s: %v: a buyer told yes paid before the deadline and was refused", c.desc, err)
		}
	case "return", "extend":
		r.answeredPartial(c, err, gate, rec)
	case "revert":
		if err == nil {
			o.reverted = true
			if o.parked == 0 && (gate.State.Takes() || rec.State.Takes()) {
				r.violate(CheckToldYes, "%s was told nil, yet the gate has it %v and the record %v", c.desc, gate.State, rec.State)
			}
		}
	}
}
