package degrade

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// Confirm confirms the order on the tier that took it: first the tier this
// node remembers, else the primary while its breaker lets traffic through,
// else the fallback. With a tiered flow as the primary, the flow (which
// reads its record itself) answers while the breaker lets calls through,
// unless this node remembers the fallback took the order; otherwise the
// flow's record path decides. stock.ErrUnknownOrder from one tier means "not taken
// there", so the other tier is asked next (and an infrastructure failure of
// the first is answered by the second if it has the order); the answer is
// ErrUnknownOrder only when both tiers say so. This rule needs no state
// shared between nodes. A fallback's stock.ErrOrderClosed is asked of the
// primary too (outside ForceFallback): an order the primary's reclaimer
// returned at the record reads as closed there, and the primary tells an
// expired hold (stock.ErrHoldExpired) from a cancel.
//
// Confirm and Revert are not new traffic: they reach the primary even
// while its breaker is open, when the order is, or may be, there. Only in
// ForceFallback mode is the primary left alone; an order the fallback does
// not know then gets an error matching stock.ErrUnknownOutcome and
// ErrPrimaryDown: retry later.
func (d *Manager) Confirm(ctx context.Context, orderID string) (err error) {
	ctx, tr := d.obs.Track(ctx, "degrade", observe.OpConfirm, 0)
	defer func() { err = stock.NameOrder(orderID, err); tr.Done(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	return d.onTaker(ctx, orderID, stock.Manager.Confirm)
}

// Revert reverts the order on the tier that took it, by the same rule as
// Confirm.
func (d *Manager) Revert(ctx context.Context, orderID string) (err error) {
	ctx, tr := d.obs.Track(ctx, "degrade", observe.OpRevert, 0)
	defer func() { err = stock.NameOrder(orderID, err); tr.Done(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	return d.onTaker(ctx, orderID, stock.Manager.Revert)
}

func (d *Manager) onTaker(ctx context.Context, id string, op func(stock.Manager, context.Context, string) error) error {
	return d.onTakerBy(ctx, id, false, func(m stock.Manager, _ bool) error { return op(m, ctx, id) })
}

// onTakerBy is onTaker with an op told whether it runs on the fallback.
// With gateToo, a tiered flow's record path does not apply the op alone to
// an order the gate may hold (one this node does not remember the fallback
// took): the call gets ErrBusy, nothing written, until the breaker lets it
// through the flow.
func (d *Manager) onTakerBy(ctx context.Context, id string, gateToo bool, op func(m stock.Manager, fallback bool) error) error {
	known, _ := d.orders.Get(id)
	r := d.route(false, d.ids)
	primaryFirst := known == atPrimary || (known == 0 && r.primary)
	if d.shared {
		// The flow reads its record itself: while the breaker lets calls
		// through, its answer stands (its error is retried through it, and
		// the retry tells the gate); while it does not, the record path
		// decides by the gate's deadlines.
		primaryFirst = r.primary && known != atFallback
	}
	callPrimary := func() error {
		if d.Mode() == ForceFallback {
			return unknown(ErrPrimaryDown)
		}
		err := op(d.primary, false)
		r.finish(ctx, err)
		r = route{}
		return err
	}
	if !primaryFirst {
		r.skip()
		r = route{}
		if gateToo && d.shared && known != atFallback {
			return ErrBusy
		}
		err := op(d.fallback, true)
		switch {
		case errors.Is(err, stock.ErrUnknownOrder):
			return callPrimary()
		case errors.Is(err, tiered.ErrWaitsForGate) && d.Mode() != ForceFallback:
			// A tiered flow's record path refunds no sale alone: the
			// flow does, through its gate (which may not know the order:
			// then at the record alone).
			return callPrimary()
		case errors.Is(err, stock.ErrOrderClosed) && d.Mode() != ForceFallback && !d.shared:
			// A record copy the primary's reclaimer returned reads as
			// closed at the record alone; the primary tells an expired
			// hold from a cancel (and makes its tiers agree). A tiered
			// flow's record path tells them itself, by the gate deadline.
			perr := callPrimary()
			if errors.Is(perr, stock.ErrUnknownOutcome) {
				return perr // the primary may have applied it: a retry settles it
			}
			if stock.IsBusiness(perr) && !errors.Is(perr, stock.ErrUnknownOrder) {
				return perr
			}
		}
		return err
	}
	err := callPrimary()
	if err == nil || (stock.IsBusiness(err) && !errors.Is(err, stock.ErrUnknownOrder)) || (d.shared && !errors.Is(err, stock.ErrUnknownOrder)) {
		return err
	}
	ferr := op(d.fallback, true)
	switch {
	case errors.Is(ferr, stock.ErrUnknownOrder):
		return err
	case ferr != nil && !stock.IsBusiness(ferr) && errors.Is(err, stock.ErrUnknownOutcome):
		// The primary may have applied the call: the fallback's failure
		// must not hide that (an answer from the fallback would settle it).
		return err
	}
	return ferr
}

// Available asks the primary or, while degraded, the fallback (rate
// limited: ErrBusy when refused).
func (d *Manager) Available(ctx context.Context, sku string) (int64, error) {
	lv, err := d.levels(ctx, sku, true)
	return lv.Available, err
}

// Levels asks the primary or, while degraded, the fallback (rate limited:
// ErrBusy when refused).
func (d *Manager) Levels(ctx context.Context, sku string) (stock.Levels, error) {
	return d.levels(ctx, sku, false)
}

func (d *Manager) levels(ctx context.Context, sku string, avail bool) (stock.Levels, error) {
	if err := stock.ValidateID("sku", sku); err != nil {
		return stock.Levels{}, err
	}
	cs, release := d.use(sku)
	defer release()
	r := d.route(true, cs...)
	m := d.fallback
	if r.primary {
		m = d.primary
	} else if !d.limiter.AllowN(d.cfg.Clock.Now(), 1) {
		return stock.Levels{}, ErrBusy
	}
	var lv stock.Levels
	var err error
	if avail {
		lv.Available, err = m.Available(ctx, sku)
	} else {
		lv, err = m.Levels(ctx, sku)
	}
	r.finish(ctx, err)
	return lv, err
}

// PutOnSale goes to the primary unless its breaker is open, then to the
// fallback (not rate limited): a tiered flow's record path writes the
// record's listing with the flow's hold times (tiered.Fallback), and the
// primary's fast tier is brought up to date by recalibration. While the
// breaker recalibrates the primary it gets ErrBusy, nothing written: the
// recalibration would miss a listing written at the fallback alone (a
// recalibration starting meanwhile waits for one under way). A tiered
// flow's record path does not write a listing that names a bucket count
// for a gate that keeps one (tiered.Fallback.PutOnSale: an error matching
// stock.ErrUnavailable, nothing written).
func (d *Manager) PutOnSale(ctx context.Context, l stock.Listing) (err error) {
	ctx, tr := d.obs.Track(ctx, "degrade", observe.OpPutOnSale, 1)
	defer func() { tr.Done(err) }()
	if err := l.Validate(); err != nil {
		return err
	}
	return d.write(ctx, l.SKU, func(m stock.Manager) error { return m.PutOnSale(ctx, l) })
}

// Restock goes where PutOnSale goes, by the same rule: to the fallback
// only while the breaker is open, and ErrBusy, nothing written, while it
// recalibrates the primary.
func (d *Manager) Restock(ctx context.Context, r stock.Restock) (err error) {
	ctx, tr := d.obs.Track(ctx, "degrade", observe.OpRestock, 1)
	defer func() { err = stock.NameRestock(r.OpID, err); tr.Done(err) }()
	if err := r.Validate(); err != nil {
		return err
	}
	return d.write(ctx, r.SKU, func(m stock.Manager) error { return m.Restock(ctx, r) })
}

// write is an operator's write about sku (PutOnSale, Restock): not new
// traffic for the ramp, not rate limited, and at the fallback alone only
// while the breaker is open (see enterFallback).
func (d *Manager) write(ctx context.Context, sku string, op func(stock.Manager) error) error {
	cs, release := d.use(sku)
	defer release()
	r := d.route(false, cs...)
	switch {
	case r.settling:
		return ErrBusy
	case !r.primary:
		leave, ok := d.enterFallback(cs)
		if !ok {
			return ErrBusy
		}
		defer leave()
		return op(d.fallback)
	}
	err := op(d.primary)
	r.finish(ctx, err)
	return err
}

// ReclaimExpired returns at most limit of the primary's expired holds and
// reports those. A primary that is a tiered flow drains its record too
// (the fallback's holds): the fallback's own reclaimer runs only when the
// primary's pass failed, so that the record's deadlines still bound every
// hold while the gate cannot be asked. With any other fallback, the
// fallback's due holds are drained as well, after the primary's. A
// failure of one does not stop the other; the error joins both. A tier
// that is not a stock.Reclaimer is skipped.
func (d *Manager) ReclaimExpired(ctx context.Context, limit int) (_ []stock.Reclaimed, err error) {
	ctx, tr := d.obs.Track(ctx, "degrade", observe.OpReclaim, 0)
	defer func() { tr.Done(err) }()
	if limit < 1 {
		return nil, &stock.InvalidError{Field: "limit", Reason: "must be at least 1"}
	}
	var got []stock.Reclaimed
	var perr, ferr error
	if r, ok := d.primary.(stock.Reclaimer); ok {
		got, perr = r.ReclaimExpired(ctx, limit)
	}
	if r, ok := d.fallback.(stock.Reclaimer); ok && (!d.shared || perr != nil) {
		for {
			n, err := r.ReclaimExpired(ctx, limit)
			if err != nil {
				ferr = err
				break
			}
			if len(n) < limit {
				break
			}
		}
	}
	return got, errors.Join(perr, ferr)
}

// Orders implements stock.OrderReader: the primary answers, and the
// orders it does not know are asked of the fallback. When the primary
// cannot be asked, the fallback answers alone, and the call fails with the
// primary's error if the fallback did not know some order (the primary
// may have it). Both tiers must be stock.OrderReaders: otherwise the call
// fails with an error wrapping errors.ErrUnsupported.
func (d *Manager) Orders(ctx context.Context, ids []string) ([]stock.OrderInfo, error) {
	p, f, err := d.readers()
	if err != nil {
		return nil, err
	}
	out, perr := p.Orders(ctx, ids)
	if perr != nil && stock.IsBusiness(perr) {
		return nil, perr
	}
	var missing []string
	var at []int
	if perr != nil {
		out = make([]stock.OrderInfo, len(ids))
	}
	for i := range out {
		if out[i].State == stock.StateUnknown {
			missing = append(missing, ids[i])
			at = append(at, i)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	got, ferr := f.Orders(ctx, missing)
	if ferr != nil {
		if perr != nil {
			return nil, perr
		}
		return nil, ferr
	}
	for j, i := range at {
		out[i] = got[j]
		if perr != nil && got[j].State == stock.StateUnknown {
			return nil, perr
		}
	}
	return out, nil
}

// UserUnits implements stock.OrderReader: the primary's count, or the
// fallback's when the primary cannot answer (an infrastructure error).
// With the usual wiring (a tiered primary whose record is the fallback)
// both count every order of the record; with a fallback of its own, the
// orders it took while degraded are counted there only.
func (d *Manager) UserUnits(ctx context.Context, sku, userID string) (int64, error) {
	p, f, err := d.readers()
	if err != nil {
		return 0, err
	}
	n, perr := p.UserUnits(ctx, sku, userID)
	if perr == nil || stock.IsBusiness(perr) {
		return n, perr
	}
	return f.UserUnits(ctx, sku, userID)
}

// readers returns both tiers as stock.OrderReaders.
func (d *Manager) readers() (p, f stock.OrderReader, err error) {
	p, ok1 := d.primary.(stock.OrderReader)
	f, ok2 := d.fallback.(stock.OrderReader)
	if !ok1 || !ok2 {
		return nil, nil, fmt.Errorf("degrade: both tiers must be stock.OrderReaders to read orders: %w", errors.ErrUnsupported)
	}
	return p, f, nil
}
