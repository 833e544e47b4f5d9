package systemtest

import (
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// view is one reading of both tiers: every SKU's levels and every order's
// state. The checker reads it between steps, when no call is running (a
// parked call is stopped at a hand-off), so it is consistent.
type view struct {
	gate, rec       map[string]stock.Levels
	gateOK          map[string]bool // false: the gate has no state for the SKU (it admits nothing)
	gateOrd, recOrd map[string]stock.OrderInfo
}

// readAttempts bounds how often a failed reading is repeated (a restarted
// server takes a moment to answer again).
const readAttempts = 20

func retryRead[T any](r *runner, read func() (T, error)) (T, error) {
	var v T
	var err error
	for range readAttempts {
		if v, err = read(); err == nil || errors.Is(err, errNoState) || r.ctx.Err() != nil {
			return v, err
		}
		time.Sleep(25 * time.Millisecond)
	}
	return v, err
}

func (r *runner) read() (view, error) {
	v := view{gate: map[string]stock.Levels{}, rec: map[string]stock.Levels{}, gateOK: map[string]bool{},
		gateOrd: map[string]stock.OrderInfo{}, recOrd: map[string]stock.OrderInfo{}}
	for _, sku := range r.skus {
		lv, err := retryRead(r, func() (stock.Levels, error) {
			lv, err := r.cfg.Gate.Levels(r.ctx, sku)
			if errors.Is(err, stock.ErrUnavailable) || errors.Is(err, stock.ErrUnknownSKU) {
				return lv, errNoState
			}
			return lv, err
		})
		switch {
		case errors.Is(err, errNoState):
		case err != nil:
			return v, fmt.Errorf("gate levels of %s: %w", sku, err)
		default:
			v.gate[sku], v.gateOK[sku] = lv, true
		}
		lv, err = retryRead(r, func() (stock.Levels, error) { return r.cfg.Record.Levels(r.ctx, sku) })
		if err != nil {
			return v, fmt.Errorf("record levels of %s: %w", sku, err)
		}
		v.rec[sku] = lv
	}
	ids := make([]string, len(r.orders))
	for i, o := range r.orders {
		ids[i] = o.id
	}
	if len(ids) == 0 {
		return v, nil
	}
	for _, t := range []struct {
		rd  Reader
		out map[string]stock.OrderInfo
	}{{r.cfg.Gate, v.gateOrd}, {r.cfg.Record, v.recOrd}} {
		infos, err := retryRead(r, func() ([]stock.OrderInfo, error) { return t.rd.Orders(r.ctx, ids) })
		if err != nil {
			return v, fmt.Errorf("orders: %w", err)
		}
		for _, in := range infos {
			t.out[in.ID] = in
		}
	}
	return v, nil
}

var errNoState = errors.New("no gate state")

// readOne returns the gate's and the record's view of one order.
func (r *runner) readOne(id string) ([2]stock.OrderInfo, bool) {
	var out [2]stock.OrderInfo
	for i, rd := range []Reader{r.cfg.Gate, r.cfg.Record} {
		infos, err := retryRead(r, func() ([]stock.OrderInfo, error) { return rd.Orders(r.ctx, []string{id}) })
		if err != nil || len(infos) != 1 {
			r.line += fmt.Sprintf(" (check of %s skipped: %v)", id, err)
			return out, false
		}
		out[i] = infos[0]
	}
	return out, true
}

// unsure reports whether the order may be half-way between states at the
// gate (lines in different states, or a hold returned at the gate whose
// record copy is still to be returned): a call about it is parked, its
// latest call got no definitive answer, or a reclaim that may have
// returned its hold failed.
func (r *runner) unsure(o *order) bool {
	if o.parked > 0 || o.doubtful() {
		return true
	}
	// A hold past its deadline may be half returned at the gate: the
	// reclaimer returns an order's lines SKU by SKU, so a pass that failed
	// or died may have returned some of them, and a take a parked Deduct
	// sent may land after a pass returned the others. It stays so until a
	// pass sent after that returns the rest (a pass sent before it and
	// resumed after peeked too early), or while a reclaim is parked.
	half := r.badReclaim > r.goodReclaim || o.late > r.goodReclaim
	for _, c := range r.parked {
		if c.kind == "reclaim" {
			half = true
		}
	}
	return half && !r.now().Before(o.deadlineMin())
}

// restocked returns the units of sku's restocks told nil, and of those
// sent and not (yet) told anything definitive.
func (r *runner) restocked(sku string) (ok, doubt int64) {
	for _, rs := range r.restocks {
		switch {
		case rs.r.SKU != sku || !rs.sent || rs.refused:
		case rs.ok:
			ok += rs.r.Units
		default:
			doubt += rs.r.Units
		}
	}
	return ok, doubt
}

// checkState checks the promises that hold between any two steps.
func (r *runner) checkState() {
	v, err := r.read()
	if err != nil {
		r.line += " (state check skipped: " + shorten(err.Error()) + ")"
		return
	}
	r.checkView(v)
}

func (r *runner) checkView(v view) {
	type key struct{ user, sku string }
	recUser, gateUser := map[key]int64{}, map[key]int64{}
	for _, sku := range r.skus {
		g, rec := v.gate[sku], v.rec[sku]
		ok, doubt := r.restocked(sku)
		low := r.put[sku] + ok
		total := rec.Available + rec.Held + rec.Sold
		if rec.Available < 0 || rec.Held+rec.Sold > low+doubt {
			r.violate(CheckOversold, "%s: record available %d held %d sold %d, %d units put on sale and restocked (%d more in doubt)",
				sku, rec.Available, rec.Held, rec.Sold, low, doubt)
		}
		if total < low || total > low+doubt {
			r.violate(CheckConservation, "%s: record available+held+sold = %d, want %d (+ up to %d in doubt)", sku, total, low, doubt)
		}
		var held, sold, gLow, gHigh, inFlight, excused int64
		var oneSided []string // orders only one tier takes, for the report
		for _, o := range r.orders {
			q := o.qty(sku)
			if q == 0 {
				continue
			}
			ro, go_ := v.recOrd[o.id], v.gateOrd[o.id]
			// Each tier counts what partial reverts left of the line there.
			qr, qg := leftAt(ro, sku, q), leftAt(go_, sku, q)
			switch ro.State {
			case stock.StateHeld:
				held += qr
			case stock.StateConfirmed:
				sold += qr
			}
			sure := !r.unsure(o)
			if go_.State == stock.StateHeld {
				gHigh += qg
				if sure {
					gLow += qg
				}
			}
			switch {
			case sure && go_.State == stock.StateHeld && !ro.State.Takes():
				inFlight += qg
			case !sure && ro.State.Takes():
				excused += qr
			}
			if go_.State.Takes() != ro.State.Takes() && len(oneSided) < 6 {
				settled := "settled"
				if !sure {
					settled = "half-way"
				}
				oneSided = append(oneSided, fmt.Sprintf("%s×%d gate %v record %v (%s)", o.id, q, go_.State, ro.State, settled))
			}
		}
		if rec.Held != held || rec.Sold != sold {
			r.violate(CheckExactlyOnce, "%s: record held %d sold %d, its orders hold %d and bought %d", sku, rec.Held, rec.Sold, held, sold)
		}
		if !v.gateOK[sku] {
			continue
		}
		if g.Held < gLow || g.Held > gHigh {
			r.violate(CheckGateHolds, "%s: gate held %d, its held orders hold %d (%d of them settled)", sku, g.Held, gHigh, gLow)
		}
		if bound := rec.Available - inFlight + excused; g.Available < 0 || g.Available > bound {
			r.violate(CheckGateBound, "%s: gate available %d > record available %d - in flight %d + returning %d (calls half-way) = %d; orders one tier takes: %v",
				sku, g.Available, rec.Available, inFlight, excused, bound, oneSided)
		}
	}
	for _, o := range r.orders {
		ro, go_ := v.recOrd[o.id], v.gateOrd[o.id]
		if ro.State != stock.StateUnknown && !sameItems(ro.Items, o.items) {
			r.violate(CheckExactlyOnce, "%s: the record has lines %v", o, ro.Items)
		}
		if go_.State != stock.StateUnknown && !sameItems(go_.Items, o.items) {
			r.violate(CheckExactlyOnce, "%s: the gate has lines %v", o, go_.Items)
		}
		for _, it := range o.items {
			if ro.State.Takes() {
				recUser[key{o.user, it.SKU}] += leftAt(ro, it.SKU, it.Qty)
			}
			if go_.State.Takes() && !r.unsure(o) {
				gateUser[key{o.user, it.SKU}] += leftAt(go_, it.SKU, it.Qty)
			}
		}
	}
	r.checkReturns(v)
	for _, tier := range []struct {
		name string
		sum  map[key]int64
	}{{"record", recUser}, {"gate", gateUser}} {
		for k, n := range tier.sum {
			if lim := r.listing[k.sku].PerUserLimit; lim > 0 && n > lim {
				r.violate(CheckUserLimit, "%s: user %s holds or bought %d of %s at the %s, limit %d", k.sku, k.user, n, k.sku, tier.name, lim)
			}
		}
	}
}

// checkDue checks, after a reclaim that started at start and left nothing
// due, that no tier holds an order whose deadline was before start.
func (r *runner) checkDue(start time.Time) {
	v, err := r.read()
	if err != nil {
		r.line += " (deadline check skipped: " + shorten(err.Error()) + ")"
		return
	}
	for _, o := range r.orders {
		dl, ok := o.deadlineMax()
		if !ok || !dl.Before(start) {
			continue
		}
		g, rec := v.gateOrd[o.id].State, v.recOrd[o.id].State
		if g == stock.StateHeld || rec == stock.StateHeld {
			r.violate(CheckHeldPastDue, "%s: deadline at the latest %s, reclaimed at %s, still held: gate %v, record %v",
				o, dl.Format("15:04:05.000"), start.Format("15:04:05.000"), g, rec)
		}
	}
}
