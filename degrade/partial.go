package degrade

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

var (
	_ stock.PartialReverter = (*Manager)(nil)
	_ stock.HoldExtender    = (*Manager)(nil)
)

// RevertItems implements stock.PartialReverter on the tier that took the
// order, by Revert's rule (see Confirm): the tier this node remembers, else
// the primary while its breaker lets traffic through, else the fallback,
// and on stock.ErrUnknownOrder the other tier. It is not new traffic and
// not rate limited. With a tiered flow as the primary, no return is made at
// the record path alone: the gate may hold the order (it may have taken
// again an order the fallback took), and a return at the record alone
// would not reach the gate's copy (a later refund would give the gate back
// every unit, the returned ones too). A return the breaker keeps from the
// flow gets ErrBusy, nothing written (retry once the breaker lets it
// through); one of an order this node remembers the fallback took, which
// the record path answers tiered.ErrWaitsForGate, goes through the flow
// (outside ForceFallback mode), whose gate returns it, or says it does not
// know it and the flow returns it at the record alone.
//
// Both tiers must implement stock.PartialReverter; otherwise it fails,
// before anything is sent, with an error wrapping errors.ErrUnsupported.
func (d *Manager) RevertItems(ctx context.Context, r stock.Return) (err error) {
	ctx, tr := d.obs.Track(ctx, "degrade", observe.OpRevertItems, len(r.Items))
	defer func() { err = stock.NameOrder(r.OrderID, err); tr.Done(err) }()
	if err := r.Validate(); err != nil {
		return err
	}
	p, ok1 := d.primary.(stock.PartialReverter)
	f, ok2 := d.fallback.(stock.PartialReverter)
	if !ok1 || !ok2 {
		return fmt.Errorf("degrade: both tiers must be stock.PartialReverters to return part of an order: %w", errors.ErrUnsupported)
	}
	return d.onTakerBy(ctx, r.OrderID, true, func(_ stock.Manager, fallback bool) error {
		if fallback {
			return f.RevertItems(ctx, r)
		}
		return p.RevertItems(ctx, r)
	})
}

// ExtendHold implements stock.HoldExtender. An order this node remembers
// the fallback took is extended there (a tiered flow's record path moves
// the record's deadline to the new one plus the flow's grace, so that the
// flow's reclaimer reads the new deadline back, and refuses an order past
// its gate deadline); every other order is extended through the primary,
// even while its breaker is open (it is not new traffic), and the
// fallback is asked only when the primary does not know the order. A
// stock/tiered primary extends at its record alone an order its gate does
// not know (one a fallback took, on any node).
//
// Unlike Confirm, an order this node does not remember is never extended
// at the fallback while the primary cannot answer: a hold the gate may
// have would end at its old deadline there, whatever the record's copy
// says, so the primary's error is returned (retry later). In
// ForceFallback mode the fallback answers alone, and with a tiered flow as
// the primary only for an order this node remembers the fallback took;
// any other, and an order the fallback does not know, gets an error
// matching stock.ErrUnknownOutcome and ErrPrimaryDown, nothing written.
//
// Both tiers must implement stock.HoldExtender; otherwise it fails, before
// anything is sent, with an error wrapping errors.ErrUnsupported.
func (d *Manager) ExtendHold(ctx context.Context, orderID string, deadline time.Time) (err error) {
	ctx, tr := d.obs.Track(ctx, "degrade", observe.OpExtendHold, 0)
	defer func() { err = stock.NameOrder(orderID, err); tr.Done(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	p, ok1 := d.primary.(stock.HoldExtender)
	f, ok2 := d.fallback.(stock.HoldExtender)
	if !ok1 || !ok2 {
		return fmt.Errorf("degrade: both tiers must be stock.HoldExtenders to extend a hold: %w", errors.ErrUnsupported)
	}
	onFallback := func() error { return f.ExtendHold(ctx, orderID, deadline) }
	known, _ := d.orders.Get(orderID)
	if d.Mode() == ForceFallback && known != atFallback && d.shared {
		// The gate may hold the order: extended at the record alone, it
		// would still end at its old deadline.
		return unknown(ErrPrimaryDown)
	}
	if known == atFallback || d.Mode() == ForceFallback {
		err := onFallback()
		switch {
		case !errors.Is(err, stock.ErrUnknownOrder):
			return err
		case d.Mode() == ForceFallback:
			return unknown(ErrPrimaryDown)
		}
	}
	r := d.route(false, d.ids)
	err = p.ExtendHold(ctx, orderID, deadline)
	r.finish(ctx, err)
	if errors.Is(err, stock.ErrUnknownOrder) && known != atFallback {
		return onFallback()
	}
	return err
}
