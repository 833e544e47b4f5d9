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
//     says why and is made to agree (see closedAtRecord). When the gate
//     no longer knows the order, the record's deadline gives the reason:
//     stock.ErrHoldExpired once the order's gate deadline has passed (a
//     copy returned by the reclaimer), stock.ErrOrderClosed before.
//   - The record confirmed: the gate is confirmed. The hold began at the
//     gate, so the gate's deadline decides: if the gate says the hold
//     expired (or a Revert closed it there first), the record's confirm is
//     undone and the gate's error returned. If the gate does not know the
//     order at all (it was flushed, or a fallback took the order while the
//     gate was down), the sale stands, Confirm returns nil and the
//     disagreement goes to Config.OnDrift.
//
// After an infrastructure error call Confirm again. Once the record has
// confirmed, every error is a *TierError matching stock.ErrUnknownOutcome
// (the gate could not be asked, or the record's confirm could not be
// undone): the retry finishes the job and gives the final answer.
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
	case ended(gerr):
		// The hold began at the gate, so the gate's deadline (and a revert
		// that reached the gate first) decides: undo the record's confirm.
		if rerr := m.record.Revert(ctx, orderID); rerr != nil {
			return &TierError{Tier: Record, Op: "revert after the gate closed", Err: rerr, Outcome: gerr}
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
// Settle), and never leaves it recorded. A gate that answers
// stock.ErrUnavailable (it lost its data, so it holds nothing the revert
// could return, and a racing hand-off cannot pass its recheck) does not
// stop the revert at the record: the order is cancelled there, and the
// answer is the gate's error only when the record did not know the order
// either.
func (m *Manager) Revert(ctx context.Context, orderID string) error {
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	gerr := m.gate.Revert(ctx, orderID)
	if gerr != nil && !errors.Is(gerr, stock.ErrUnknownOrder) && !unavailable(gerr) {
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
	case unavailable(gerr):
		return gerr // the gate may know it: ask again
	default:
		return stock.ErrUnknownOrder
	}
}

// closedAtRecord answers a Confirm that the record refused because the
// order's copy there ended (cause): the gate says why. Its hold normally
// ended first (the reclaimer reverts the record's copy after the gate
// returns the hold, so the record says "reverted" where the gate says
// "expired"). A gate that still held the order is made to agree: the hold
// is returned there too. A gate that does not know the order (it lost its
// record of it, or never had it) cannot say why: closedReason does.
func (m *Manager) closedAtRecord(ctx context.Context, orderID string, cause error) error {
	gerr := m.gate.Confirm(ctx, orderID)
	switch {
	case ended(gerr):
		return gerr
	case gerr == nil:
		// Confirmed at the gate alone: undo it, the record has no hold.
		if rerr := m.gate.Revert(ctx, orderID); rerr != nil {
			return &TierError{Tier: Gate, Op: "revert after the record closed", Err: rerr, Outcome: cause}
		}
		return cause
	case stock.IsBusiness(gerr), unavailable(gerr):
		return m.closedReason(ctx, orderID, cause)
	default:
		return &TierError{Tier: Gate, Op: "confirm after the record closed", Err: gerr, Outcome: cause}
	}
}

// closedReason is the answer to a Confirm of an order whose record copy
// was reverted (cause) while the gate cannot say why. The reclaimer
// reverts a copy only after the order's gate deadline, so a copy whose
// gate deadline has passed is reported as expired; before it, the order
// was reverted by a caller. The answer is the record's when it cannot be
// read.
func (m *Manager) closedReason(ctx context.Context, orderID string, cause error) error {
	if !errors.Is(cause, stock.ErrOrderClosed) {
		return cause
	}
	infos, err := m.record.Orders(ctx, []string{orderID})
	if err != nil || len(infos) != 1 || infos[0].Deadline.IsZero() {
		return cause
	}
	due, err := m.gateDeadline(ctx, infos[0], nil)
	if err != nil || due.After(m.cfg.Clock.Now()) {
		return cause
	}
	return stock.ErrHoldExpired
}

// unavailable reports whether err says the store could not answer and
// applied nothing (stock.ErrUnavailable).
func unavailable(err error) bool {
	return errors.Is(err, stock.ErrUnavailable) && !errors.Is(err, stock.ErrUnknownOutcome)
}
