package tiered

import (
	"context"
	"errors"

	"github.com/stockguard/stockguard/stock"
)

// Confirm makes the sale final at the record (the truth), then at the gate.
//
//   - The record does not know the order: stock.ErrUnknownOrder, nothing
//     changes (with a Recorder, the order may still be pending: confirm
//     after Settle returned nil).
//   - The record says the hold expired or the order was reverted: the gate
//     hold is reverted too and the record's error returned.
//   - The record confirmed: the gate is confirmed. The hold began at the
//     gate, so the gate's deadline decides: if the gate says the hold
//     expired (or a Revert closed it there first), the record's confirm is
//     undone and the gate's error returned. If the gate does not know the
//     order at all (it was flushed, or a fallback took the order while the
//     gate was down), the sale stands, Confirm returns nil and the
//     disagreement goes to Config.OnDrift.
//
// After an infrastructure error (a *TierError when it came from the gate)
// call Confirm again.
func (m *Manager) Confirm(ctx context.Context, orderID string) error {
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	err := m.record.Confirm(ctx, orderID)
	switch {
	case err == nil:
	case ended(err):
		return m.closedAtRecord(ctx, orderID, err)
	default:
		return err
	}
	gerr := m.gate.Confirm(ctx, orderID)
	switch {
	case gerr == nil:
		return nil
	case errors.Is(gerr, stock.ErrHoldExpired) || errors.Is(gerr, stock.ErrOrderClosed):
		// The hold began at the gate, so the gate's deadline (and a revert
		// that reached the gate first) decides: undo the record's confirm.
		if rerr := m.record.Revert(ctx, orderID); rerr != nil {
			return errors.Join(gerr, &TierError{Tier: Record, Op: "revert after the gate closed", Err: rerr})
		}
		return gerr
	case stock.IsBusiness(gerr):
		// The gate never saw the order (flushed, or taken by a fallback
		// while it was down): the record's sale stands.
		m.drift(Drift{OrderID: orderID, Tier: Gate, Op: "confirm", Err: gerr})
		return nil
	default:
		return &TierError{Tier: Gate, Op: "confirm", Err: gerr}
	}
}

// Revert returns what the order took at the gate, then at the record. It
// returns nil when either tier knew the order (a repeat returns nil and
// changes nothing), stock.ErrUnknownOrder when neither did. After an
// infrastructure error call it again.
//
// The gate goes first so that a hand-off racing the revert always sees the
// order closed at the gate, before or after it writes the record (see
// Settle), and never leaves it recorded.
func (m *Manager) Revert(ctx context.Context, orderID string) error {
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	gerr := m.gate.Revert(ctx, orderID)
	if gerr != nil && !errors.Is(gerr, stock.ErrUnknownOrder) {
		return gerr
	}
	rerr := m.record.Revert(ctx, orderID)
	switch {
	case rerr == nil:
		return nil
	case !errors.Is(rerr, stock.ErrUnknownOrder):
		if gerr == nil {
			return &TierError{Tier: Record, Op: "revert", Err: rerr}
		}
		return rerr
	case gerr == nil:
		return nil // held at the gate only: pending, or its record failed
	default:
		return stock.ErrUnknownOrder
	}
}

// closedAtRecord answers a Confirm that the record refused because the
// order's copy there ended (cause): the gate says why. Its hold normally
// ended first (the reclaimer reverts the record's copy after the gate
// returns the hold, so the record says "reverted" where the gate says
// "expired"). A gate that still held the order is made to agree: the hold
// is returned there too.
func (m *Manager) closedAtRecord(ctx context.Context, orderID string, cause error) error {
	gerr := m.gate.Confirm(ctx, orderID)
	switch {
	case ended(gerr):
		return gerr
	case gerr == nil:
		// Confirmed at the gate alone: undo it, the record has no hold.
		if rerr := m.gate.Revert(ctx, orderID); rerr != nil {
			return errors.Join(cause, &TierError{Tier: Gate, Op: "revert after the record closed", Err: rerr})
		}
		return cause
	case stock.IsBusiness(gerr):
		return cause // the gate never had it
	default:
		return errors.Join(cause, &TierError{Tier: Gate, Op: "confirm after the record closed", Err: gerr})
	}
}
