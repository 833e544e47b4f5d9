package tiered

import (
	"context"
	"errors"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Confirm makes the sale final at both tiers. It reads the order at the
// record first (the truth; one read by order ID), and what it finds
// decides:
//
//   - Held: the gate is asked first, since the hold began there and its
//     deadline decides. The gate confirmed: the record is confirmed. The
//     gate says the hold expired, or a Revert closed the order: the
//     record's copy is returned and the gate's error given, so the answer
//     is final whatever becomes of the gate; the record never confirms an
//     order its gate closed. A copy returned for a Revert's closed order
//     reads as the gate has it, reverted (Orders), and a Confirm racing
//     that Revert answers stock.ErrOrderClosed, not stock.ErrHoldExpired.
//     The gate does not know the order (it lost
//     its data, or a fallback took the order while it was down): the
//     record decides by the order's gate deadline (its own deadline less
//     the grace RecordHold added), as ReclaimExpired's follow-up does:
//     before it, the record is confirmed and the sale stands (reported to
//     Config.OnDrift); once it has passed, stock.ErrHoldExpired and the
//     copy is returned. The gate cannot be asked, or its answer was lost:
//     it may still hold the order, and its reclaimer would return that
//     hold at its deadline, so the record confirms nothing (a sale there
//     would be units the gate sells again); the answer is a *TierError,
//     call again. The record confirms a held order only once the gate has
//     confirmed it or holds nothing of it. A copy past its own deadline
//     at the record (not reclaimed yet) is expired whatever the gate
//     holds (a gate that lost the order and took a repeat of it afresh
//     holds it longer): nothing is confirmed at the gate, both copies
//     end expired, and the answer is stock.ErrHoldExpired.
//   - Confirmed: a repeat. The sale stands whatever the gate says now: a
//     sale confirmed at the record (by this Manager, or by a fallback
//     while the gate was down) is never undone by a later Confirm. The
//     gate is told: a gate that says the hold ended goes to
//     Config.OnDrift; one that cannot be asked makes the answer a
//     *TierError (the gate may still hold the order: call again to tell
//     it); one that lost its data (stock.ErrUnavailable) holds nothing.
//   - Not recorded (with a Recorder, the order may still be pending):
//     stock.ErrUnknownOrder, nothing changes: confirm after Settle.
//   - Ended at the record: the gate says why and is made to agree (see
//     closedAtRecord): a gate hold that still runs ends as the record's
//     copy did, expired or reverted, and the record's answer is given.
//     When the gate no longer knows the order, the record's state says
//     why: stock.ErrHoldExpired for a copy that expired (the reclaimers,
//     and a Revert past the order's gate deadline, end copies expired),
//     stock.ErrOrderClosed for one a caller reverted before its deadline,
//     or a sale refunded.
//
// After an infrastructure error call Confirm again. Once a tier may have
// confirmed, every error is a *TierError matching stock.ErrUnknownOutcome:
// the retry finishes the job and gives the final answer.
func (m *Manager) Confirm(ctx context.Context, orderID string) (err error) {
	ctx, tr := m.obs.Track(ctx, "tiered", observe.OpConfirm, 0)
	defer func() { tr.Done(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	in, err := m.recordOrder(ctx, orderID)
	if err != nil {
		return err // a read: nothing written
	}
	switch in.State {
	case stock.StateHeld:
		return m.confirmHeld(ctx, in)
	case stock.StateConfirmed:
		gerr := m.gate.Confirm(ctx, orderID)
		switch {
		case gerr == nil, unavailable(gerr):
			// Told, or a gate that lost its data and holds nothing.
		case stock.IsBusiness(gerr):
			m.drift(Drift{OrderID: orderID, Tier: Gate, Op: "confirm", Err: gerr})
		default:
			// The gate may still hold the order and would return it at
			// its deadline: the sale stands, and a retry tells the gate.
			return &TierError{Tier: Gate, Op: "confirm", Err: gerr}
		}
		return nil
	case stock.StateUnknown:
		// Not recorded (yet): nothing changes. A Confirm at the record
		// now could sell a hold whose hand-off lands meanwhile after its
		// gate deadline passed; confirm after Settle.
		return stock.ErrUnknownOrder
	}
	err = m.record.Confirm(ctx, orderID)
	if ended(err) {
		return m.closedAtRecord(ctx, orderID, in.State, err)
	}
	return err
}

// confirmHeld confirms an order the record holds, as Confirm's read found
// it (see Confirm).
func (m *Manager) confirmHeld(ctx context.Context, in stock.OrderInfo) error {
	id := in.ID
	if !in.Deadline.After(m.cfg.Clock.Now()) {
		return m.confirmPastRecord(ctx, in)
	}
	gerr := m.gate.Confirm(ctx, id)
	switch {
	case gerr == nil:
		rerr := m.record.Confirm(ctx, id)
		switch {
		case rerr == nil:
			return nil
		case stock.IsBusiness(rerr):
			// The record's copy ended since it was read (a cancel done
			// at the record alone): the gate's confirm is undone. A
			// Revert racing this call may have refunded it at the gate
			// first, and a Confirm that found the order closed there
			// returned the record's copy: the order was reverted, and
			// the answer is stock.ErrOrderClosed, as the gate gives it.
			if ended(rerr) {
				if g, err := m.gateOrder(ctx, id); err == nil && (g.State == stock.StateReverted || g.State == stock.StateRefunded) {
					return stock.ErrOrderClosed
				}
			}
			if err := m.gate.Revert(ctx, id); err != nil {
				return &TierError{Tier: Gate, Op: "revert after the record closed", Err: err, Outcome: rerr}
			}
			return rerr
		default:
			return &TierError{Tier: Record, Op: "confirm", Err: rerr}
		}
	case ended(gerr):
		// The hold began at the gate and ended there (it expired, or a
		// Revert closed the order): the record's copy goes too, and is
		// never confirmed, so the answer is final whatever becomes of
		// the gate. A copy returned for a Revert's closed order reads as
		// reverted (see Orders and closedAtRecord).
		sold, rerr := m.revertRecord(ctx, id, "confirm")
		if rerr != nil {
			rerr.Outcome = gerr
			return rerr
		}
		if sold {
			return nil // a Confirm decided by the record sold it meanwhile
		}
		return gerr
	case stock.IsBusiness(gerr), unavailable(gerr):
		return m.confirmByRecord(ctx, in, gerr)
	default:
		// The gate may still hold the order (it could not be asked, or
		// its answer was lost): its deadline decides, and its reclaimer
		// would return a hold the record had confirmed. Nothing changes
		// at the record; the retry asks the gate again.
		return &TierError{Tier: Gate, Op: "confirm", Err: gerr}
	}
}

// confirmPastRecord answers a Confirm of an order whose record copy (in)
// is past its own deadline, not reclaimed yet: the record refuses to
// confirm it, whatever the gate holds (a gate that lost the order and took
// a repeat of it afresh, or an extension that did not reach the record,
// holds it longer). Nothing is confirmed at the gate, whose confirm could
// only be undone by a refund there: the copy is returned at the record
// (kept if a Confirm sold it meanwhile: a repeat, nil), then the gate's
// hold ends expired, and the answer is stock.ErrHoldExpired, as every
// later look at the order says (Orders, a repeat Deduct, Confirm again).
// A sale the gate has already (a Confirm that stopped between the tiers)
// is left to reconciliation (see endGateCopy).
func (m *Manager) confirmPastRecord(ctx context.Context, in stock.OrderInfo) error {
	sold, rerr := m.revertRecord(ctx, in.ID, "confirm")
	if rerr != nil {
		rerr.Outcome = stock.ErrHoldExpired
		return rerr
	}
	if sold {
		return nil
	}
	known, err := m.endGateCopy(ctx, in.ID, skusOf(in.Items), stock.ErrHoldExpired)
	switch {
	case unavailable(err), err == nil && !known:
		// The gate holds nothing of the order (it lost it, or a fallback
		// took it): the units came back at the record alone.
		m.returnedAtRecord(in)
	case err != nil:
		return &TierError{Tier: Gate, Op: "revert after the record expired", Err: err, Outcome: stock.ErrHoldExpired}
	}
	return stock.ErrHoldExpired
}

// confirmByRecord confirms a held order that the gate holds nothing of
// (gerr: it does not know the order, or lost its data), by the order's
// gate deadline, as ReclaimExpired's follow-up returns such copies: once
// that deadline has passed the order expired, before it the record
// confirms, and the sale stands even if the deadline passes while it does
// (a follow-up returning the copy meanwhile finds it confirmed and keeps
// it: it returns copies only while they are held; an undo here could
// refund a sale a concurrent Confirm of the same order has answered). The
// sale is reported to Config.OnDrift with gerr. A gate that may still
// hold the order never gets here: the record confirms only what the gate
// can no longer return.
func (m *Manager) confirmByRecord(ctx context.Context, in stock.OrderInfo, gerr error) error {
	id := in.ID
	due, err := m.gateDeadline(ctx, in, nil)
	if err != nil {
		return &TierError{Tier: Record, Op: "read hold times", Err: err, Outcome: gerr}
	}
	if !due.After(m.cfg.Clock.Now()) {
		sold, rerr := m.revertRecord(ctx, id, "confirm")
		if rerr != nil {
			rerr.Outcome = stock.ErrHoldExpired
			return rerr
		}
		if sold {
			return nil // confirmed since the read, before its deadline: a repeat
		}
		m.returnedAtRecord(in)
		return stock.ErrHoldExpired
	}
	if rerr := m.record.Confirm(ctx, id); rerr != nil {
		if ended(rerr) {
			return rerr
		}
		if stock.IsBusiness(rerr) {
			return rerr
		}
		return &TierError{Tier: Record, Op: "confirm", Err: rerr}
	}
	m.drift(Drift{OrderID: id, Tier: Gate, Op: "confirm", Err: gerr, SKUs: skusOf(in.Items)})
	return nil
}

// Revert returns what the order took at the gate, then at the record. It
// returns nil when either tier knew the order (a repeat returns nil and
// changes nothing), stock.ErrUnknownOrder when neither did. After an
// infrastructure error call it again.
//
// The gate goes first so that a hand-off racing the revert always sees the
// order closed at the gate, before or after it writes the record (see
// Settle), and never leaves it recorded. A gate that does not know the
// order (it lost its data, or a fallback took the order while it was
// down), or answers stock.ErrUnavailable for an order the record holds
// (it lost its data, so it holds nothing the revert could return, and a
// racing hand-off cannot pass its recheck), does not stop the revert at
// the record: the order is cancelled there alone, as [Fallback.Revert]
// does, and its SKUs are reported to Config.OnDrift (the units are back
// at the record, not at the gate). A gate that said it did not know the
// order is then asked once more, when the record had it: a Deduct racing
// the revert (a client cancelling a Deduct that timed out while it is
// still in flight) places its gate hold before it writes the record, so
// the gate may hold the order by now, and a hold found there is returned
// too. The answer is the gate's error only when the record did not know
// the order either. A sale (an order the
// record has confirmed) is refunded through the gate only: a gate that
// cannot be asked is the answer, with nothing written, since a copy it
// still had would give the units back a second time once reconciliation
// counted the record's refund into it (see RevertItems).
//
// The record is read first (one read by order ID; an error there is the
// answer, with nothing written). An order it has returned already
// (reverted, refunded or expired there: at the record alone, perhaps,
// while the gate was out of reach or had lost part of the order) is a
// repeat, nil: at the gate only a copy still held is returned (returnGate).
// A sale the gate took again after the record gave units of it back alone
// is refunded at the record alone (see lags).
//
// A held order reverted past its deadline ends expired, as on every
// backend: the gate ends such a hold expired, and the gate is read once
// more after its revert so that the record's copy ends as the gate's did
// (RevertHeld); returned at the record alone, the copy ends expired once
// the order's gate deadline has passed. So a Confirm, a repeat Deduct and
// Orders answer a reverted order stock.ErrOrderClosed, and an expired one
// stock.ErrHoldExpired, after the gate has forgotten it too.
func (m *Manager) Revert(ctx context.Context, orderID string) (err error) {
	ctx, tr := m.obs.Track(ctx, "tiered", observe.OpRevert, 0)
	defer func() { tr.Done(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	in, err := m.recordOrder(ctx, orderID)
	if err != nil {
		return err
	}
	if endedAnswer(in.State) != nil {
		return m.returnGate(ctx, in)
	}
	behind, err := m.lagging(ctx, in, stock.StateConfirmed)
	if err != nil {
		return err // a read: nothing written
	}
	if behind {
		return m.revertByRecord(ctx, in)
	}
	gerr := m.gate.Revert(ctx, orderID)
	switch {
	case gerr == nil:
	case errors.Is(gerr, stock.ErrUnknownOrder), unavailable(gerr) && in.State != stock.StateConfirmed:
		// The gate holds nothing of the order: the record alone returns it.
		rerr := m.revertByRecord(ctx, in)
		switch {
		case rerr == nil && errors.Is(gerr, stock.ErrUnknownOrder):
			// A Deduct of the order racing this call may have placed its
			// gate hold since the gate was asked (it goes gate first, then
			// record, and passed its recheck before the gate is asked
			// again): that hold ends too.
			return m.endGateHold(ctx, orderID)
		case !errors.Is(rerr, stock.ErrUnknownOrder):
			return rerr
		case unavailable(gerr):
			return gerr // the gate may know it: ask again
		default:
			return stock.ErrUnknownOrder
		}
	default:
		return gerr
	}
	expired := false
	if in.State == stock.StateHeld {
		// The gate ends a hold past its deadline expired, not reverted:
		// the record's copy ends as the gate's did.
		g, err := m.gateOrder(ctx, orderID)
		if err != nil {
			return &TierError{Tier: Gate, Op: "read after the revert", Err: err}
		}
		expired = g.State == stock.StateExpired
		if g.State == stock.StateUnknown {
			// Forgotten since its revert (a short Retention): judged by
			// the order's gate deadline, as the record path judges.
			due, err := m.gateDeadline(ctx, in, nil)
			if err != nil {
				return &TierError{Tier: Gate, Op: "read after the revert", Err: err}
			}
			expired = !due.After(m.cfg.Clock.Now())
		}
	}
	rerr := m.endRecordCopy(ctx, orderID, expired)
	switch {
	case rerr == nil, errors.Is(rerr, stock.ErrUnknownOrder):
		return nil // or held at the gate only: pending, or its record failed
	default:
		return &TierError{Tier: Record, Op: "revert", Err: rerr}
	}
}

// endRecordCopy returns the order's copy at the record for a Revert: one
// held past the order's gate deadline (expired) ends expired there
// (RevertHeld), as the gate and every backend end a hold reverted past its
// deadline, so that a copy the record has reverted is always one a caller
// closed before its deadline, and says so once the gate has forgotten the
// order; any other copy is reverted (a sale refunded). An order the record
// does not know is stock.ErrUnknownOrder.
func (m *Manager) endRecordCopy(ctx context.Context, id string, expired bool) error {
	if expired {
		found, err := m.record.RevertHeld(ctx, id)
		switch {
		case err != nil:
			return err
		case found == stock.StateUnknown:
			return stock.ErrUnknownOrder
		case found != stock.StateConfirmed:
			return nil
		}
		// Confirmed since the read: a sale, refunded as Revert refunds it.
	}
	return m.record.Revert(ctx, id)
}

// returnGate answers a Revert of an order the record returned already (in
// is its record copy). The gate's copy is returned only while it is held
// (closedAtRecord follows the same rule for a Confirm): the record's units
// came back, and reconciliation counts a hold at the gate as units in
// flight, so the hold must end; a sale the gate still has is left as it
// is, since reconciliation counted its units back into the gate when the
// record refunded them, and a refund there would pay them out twice. The
// SKUs are reported to Config.OnDrift: the call that returned the order at
// the record may have stopped before it reported them.
func (m *Manager) returnGate(ctx context.Context, in stock.OrderInfo) error {
	m.drift(Drift{OrderID: in.ID, Tier: Gate, Op: "revert of an order the record returned", SKUs: skusOf(in.Items), Err: errReturnedAtRecord})
	return m.endGateHold(ctx, in.ID)
}

// endGateHold returns the gate's copy of an order the record has returned,
// only while the gate holds it: a sale there is left as it is (see
// returnGate). The record was written, so a failure is a *TierError, and
// the retry (Revert again) finds the record's copy returned and comes
// here through returnGate.
func (m *Manager) endGateHold(ctx context.Context, id string) error {
	g, err := m.gateOrder(ctx, id)
	switch {
	case err != nil:
		return &TierError{Tier: Gate, Op: "read", Err: err}
	case g.State != stock.StateHeld:
		return nil
	}
	if err := m.gate.Revert(ctx, id); err != nil && !errors.Is(err, stock.ErrUnknownOrder) {
		return &TierError{Tier: Gate, Op: "revert", Err: err}
	}
	return nil
}

// closedAtRecord answers a Confirm that the record refused because the
// order's copy there ended (cause). A gate that still held the order is
// made to agree: the hold is returned there too. A sale the gate has
// already is left as it is, as Revert leaves it (see returnGate): its
// units are reconciliation's. A sale the record refunded (state, as
// Confirm read it) is closed, stock.ErrOrderClosed as on every backend
// and in Orders, whatever the gate says: its hold of a sale confirmed at
// the record alone may have expired there. Another copy gets the gate's
// answer when it has one (a copy reverted when the gate's hold had
// expired reads as expired; a Revert racing the Confirm that returned the
// copy closed the order there: stock.ErrOrderClosed). A gate that does
// not know the order (it lost its record of it, or never had it) cannot
// say why: the record's answer stands (a copy returned past the order's
// gate deadline ended expired there, see endRecordCopy, so a reverted
// copy was closed by a caller).
func (m *Manager) closedAtRecord(ctx context.Context, orderID string, state stock.State, cause error) error {
	g, err := m.gateOrder(ctx, orderID)
	switch {
	case err != nil:
		return &TierError{Tier: Gate, Op: "read after the record closed", Err: err, Outcome: cause}
	case g.State == stock.StateConfirmed:
		m.drift(Drift{OrderID: orderID, Tier: Gate, Op: "confirm of an order the record returned", SKUs: skusOf(g.Items), Err: cause})
		return cause
	case g.State == stock.StateHeld && g.Deadline.After(m.cfg.Clock.Now()) && state != stock.StateRefunded:
		// The gate's hold still runs (the record's copy ended first):
		// it ends as the record's did, expired or reverted, never
		// confirmed then refunded there, so the gate, asked later, gives
		// this answer again.
		if _, err := m.endGateCopy(ctx, orderID, skusOf(g.Items), cause); err != nil {
			return &TierError{Tier: Gate, Op: "revert after the record closed", Err: err, Outcome: cause}
		}
		return cause
	}
	gerr := m.gate.Confirm(ctx, orderID)
	switch {
	case ended(gerr):
		if state == stock.StateRefunded && errors.Is(cause, stock.ErrOrderClosed) {
			return cause // a sale, refunded since
		}
		return gerr
	case gerr == nil:
		// Confirmed at the gate alone: undo it, the record has no hold.
		if rerr := m.gate.Revert(ctx, orderID); rerr != nil {
			return &TierError{Tier: Gate, Op: "revert after the record closed", Err: rerr, Outcome: cause}
		}
		return cause
	case stock.IsBusiness(gerr), unavailable(gerr):
		return cause
	default:
		return &TierError{Tier: Gate, Op: "confirm after the record closed", Err: gerr, Outcome: cause}
	}
}

// unavailable reports whether err says the store could not answer and
// applied nothing (stock.ErrUnavailable).
func unavailable(err error) bool {
	return errors.Is(err, stock.ErrUnavailable) && !errors.Is(err, stock.ErrUnknownOutcome)
}
