package redisstock

import (
	"context"
	"errors"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

var _ stock.HoldReverter = (*Store)(nil)

// RevertHeld implements stock.HoldReverter: a held order's units and its
// user's quota go back and the order ends expired (a repeat Deduct gets
// stock.ErrHoldExpired, and so does a Confirm), whatever its deadline; an
// order in any other state is left alone. It reports the state it found
// the order in: stock.StateHeld for one it returned, stock.StateUnknown,
// with a nil error, for an order the gate has no record of. On one slot
// the check and the return are one script; across slots every line is
// read first, and an order any line of which is not held (or not there
// yet) is left alone, with that line's state: an order whose Deduct
// stopped between slots is stock.StateUnknown (Revert answers it
// stock.ErrUnknownOrder: the reclaimer returns the lines it took), and
// one a reclaim pass returned in part is stock.StateExpired (the next pass
// returns the rest). A line whose SKU state the gate lost fails the call
// with stock.ErrUnavailable, as Revert does.
func (s *Store) RevertHeld(ctx context.Context, orderID string) (found stock.State, err error) {
	ctx, tr := s.obs.Track(ctx, "redisstock", observe.OpRevert, 0)
	defer func() { tr.Done(err) }()
	defer named(&err, "revert held order", orderID)
	defer func() { err = publicErr(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return stock.StateUnknown, err
	}
	if err := ctx.Err(); err != nil {
		return stock.StateUnknown, notSent(err)
	}
	ident, groups, err := s.lookup(ctx, orderID)
	if errors.Is(err, stock.ErrUnknownOrder) {
		return stock.StateUnknown, nil
	}
	if err != nil {
		return stock.StateUnknown, err
	}
	if len(groups) > 1 {
		lines, err := s.readLines(ctx, orderID, groups, "")
		if err != nil {
			return stock.StateUnknown, err
		}
		for _, l := range lines {
			switch {
			case !l.of(ident):
				return stock.StateUnknown, nil // a Deduct not done, or undone
			case l.st != "held":
				return stockStates[l.st], nil
			case !l.live:
				return stock.StateUnknown, &stock.SKUError{SKU: l.sku, Err: stock.ErrUnavailable}
			}
		}
	}
	foundN, changed, seen, err := s.releaseAll(ctx, orderID, ident, groups, "held")
	if err != nil {
		if changed > 0 {
			return stock.StateHeld, err
		}
		return stock.StateUnknown, err
	}
	switch {
	case changed > 0:
		return stock.StateHeld, s.endEntry(ctx, orderID, ident)
	case foundN == 0:
		return stock.StateUnknown, nil
	}
	st, ok := stockStates[seen]
	if !ok || st == stock.StateHeld {
		return stock.StateUnknown, badReply([]any{foundN, changed, seen})
	}
	return st, nil
}
