package tiered

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Deduct places the order at the gate and hands it to the record: see
// Place. It returns nil when the gate holds the order and it is recorded
// (synchronous hand-off) or queued (with a Recorder).
func (m *Manager) Deduct(ctx context.Context, o stock.Order) error {
	_, err := m.Place(ctx, o)
	return err
}

// Place is Deduct that also says where the order stands: [Recorded] with
// the synchronous hand-off (or for a repeat of an order the record has,
// refused by a gate that lost it), [Pending] when a Recorder queued it. On error
// the order is not recorded by this call. A business error means it was
// refused for good: it holds nothing at the gate, and nothing at the record
// either. An error matching stock.ErrUnknownOutcome (a *TierError: the gate
// hold was placed and the record step, or the hand-off, failed) means the
// order is half-way: call Deduct again with the same order to finish it
// (or Revert it).
func (m *Manager) Place(ctx context.Context, o stock.Order) (_ Placement, err error) {
	ctx, tr := m.obs.Track(ctx, "tiered", observe.OpDeduct, len(o.Items))
	defer func() { tr.Done(err) }()
	if m.cfg.Recorder == nil {
		_, err := m.settle(ctx, o)
		return Recorded, err
	}
	if err := o.Validate(); err != nil {
		return Pending, err
	}
	if a, ok := m.cfg.Recorder.(Admitter); ok {
		if err := a.Admit(ctx, o); err != nil && !m.heldHalfWay(ctx, o.ID) {
			return Pending, fmt.Errorf("%w: %w", ErrNotAdmitted, err)
		}
	}
	if err := m.gate.Deduct(ctx, o); err != nil {
		if stock.IsBusiness(err) {
			m.halfWay.Remove(o.ID)
		}
		if refusal(err) {
			if err := m.refused(ctx, o, err); err != nil {
				return Pending, err
			}
			return Recorded, nil // the record has it; the gate lost it
		}
		if errors.Is(err, stock.ErrUnknownOutcome) {
			m.halfWay.Add(o.ID, struct{}{})
		}
		return Pending, err
	}
	if err := m.handOff(ctx, o); err != nil {
		m.halfWay.Add(o.ID, struct{}{})
		return Pending, &TierError{Tier: Record, Op: "hand-off", Err: err}
	}
	m.halfWay.Remove(o.ID)
	return Pending, nil
}

// handOff hands the order the gate holds to the Recorder. The retry of an
// order Place answered half-way goes with its gate deadline where the
// Recorder is a DeadlineRecorder and the gate tells it (its hold began
// with the earlier attempt); otherwise the Recorder counts the hold time
// from now.
func (m *Manager) handOff(ctx context.Context, o stock.Order) error {
	if dr, ok := m.cfg.Recorder.(DeadlineRecorder); ok && m.halfWay.Contains(o.ID) {
		if until, err := m.HeldUntil(ctx, o.ID); err == nil && !until.IsZero() {
			return dr.RecordUntil(ctx, o, until)
		}
	}
	return m.cfg.Recorder.Record(ctx, o)
}

// heldHalfWay reports whether the order is one Place left half-way and
// the gate has it (its earlier request may have been lost before the
// gate: then it is a new order, and forgotten). Only such remembered IDs
// cost a gate read.
func (m *Manager) heldHalfWay(ctx context.Context, id string) bool {
	if !m.halfWay.Contains(id) {
		return false
	}
	in, err := m.gate.Orders(ctx, []string{id})
	if err != nil || len(in) != 1 {
		return false
	}
	if in[0].State == stock.StateUnknown {
		m.halfWay.Remove(id)
		return false
	}
	return true
}

// Settle records an order the gate holds. The consumer of the Recorder's
// queue calls it; the synchronous hand-off runs the same steps.
//
// It returns nil once the record has the order (again: it is idempotent).
// A business error means the order is not recorded and holds nothing at
// either tier: from the gate (the hold expired or was reverted, before the
// record was written or while it was), a copy the record took meanwhile
// is reverted; from the record (sold out there,
// conflict, limit), the gate hold was reverted. An error from the gate's
// first step that is not a business error applied nothing; any error after
// the gate hold was placed is a *TierError matching stock.ErrUnknownOutcome:
// the order may be half-way, and Settle (or Deduct) with the same order
// finishes the job.
func (m *Manager) Settle(ctx context.Context, o stock.Order) error {
	lapsed, err := m.settle(ctx, o)
	if lapsed {
		return stock.ErrHoldExpired
	}
	return err
}

// settle is Settle; lapsed reports an order whose hold expired at the gate
// while the record was written (its record copy returned since): Settle
// answers it stock.ErrHoldExpired, and the synchronous Place nil, as if
// it had expired a moment after it was placed.
func (m *Manager) settle(ctx context.Context, o stock.Order) (lapsed bool, _ error) {
	if err := o.Validate(); err != nil {
		return false, err
	}
	if err := m.gate.Deduct(ctx, o); err != nil {
		switch {
		case ended(err):
			// The hold ended at the gate. An earlier Settle of the same
			// order may have written the record and stopped before its
			// recheck: return that copy too.
			st, rerr := m.returnCopy(ctx, o.ID)
			if rerr != nil {
				return false, rerr
			}
			switch st {
			case stock.StateConfirmed:
				return false, nil // a Confirm decided by the record sold it
			case stock.StateRefunded:
				// A sale the record refunded (its gate hold may have
				// expired there: the record confirmed it alone): closed,
				// as on every backend and in Orders, whatever the gate
				// says.
				return false, stock.ErrOrderClosed
			}
		case refusal(err):
			return false, m.refused(ctx, o, err)
		}
		return false, err
	}
	if err := m.recordDeduct(ctx, o); err != nil {
		if !stock.IsBusiness(err) {
			return false, &TierError{Tier: Record, Op: "deduct", Err: err}
		}
		sold := false
		if errors.Is(err, stock.ErrHoldExpired) {
			// A repeat whose copy at the record passed its deadline there
			// (a gate that lost the order took it again as new): the copy
			// is returned before the gate's hold, so the gate never sells
			// again units the record still holds until its reclaimer runs.
			var rerr *TierError
			if sold, rerr = m.revertRecord(ctx, o.ID, "settle"); rerr != nil {
				rerr.Outcome = err
				return false, rerr
			}
		}
		if _, rerr := m.endGateCopy(ctx, o.ID, skusOf(o.Items), err); rerr != nil {
			// The gate hold stays until a retry reverts it (or its
			// deadline): the refusal is not final yet.
			return false, &TierError{Tier: Gate, Op: "revert after the record refused", Err: rerr, Outcome: err}
		}
		if sold {
			return false, nil // confirmed meanwhile: a repeat of a sale
		}
		return false, err
	}
	// The recheck: while the record was being written, a Revert may have
	// closed the order at the gate, or the gate's reclaimer may have
	// returned the hold (and found nothing to revert at the record yet).
	// Either way the gate decided and the record's copy goes too.
	err := m.gate.Deduct(ctx, o)
	switch {
	case err == nil:
		return false, nil
	case !stock.IsBusiness(err):
		// The gate cannot say (a timeout, or stock.ErrUnavailable: it
		// lost its data): the record holds the order and the gate may.
		return false, &TierError{Tier: Gate, Op: "recheck", Err: err}
	case refusal(err):
		// The gate no longer knows the order (it lost it, and the
		// re-Deduct was refused as a new order: unknown SKU, sold out,
		// conflict): the record, which has it, answers, as for the first
		// step.
		return false, m.refused(ctx, o, err)
	}
	// Expired or closed: the gate decided, and the record's copy is
	// returned before the answer is given.
	sold, rerr := m.revertRecord(ctx, o.ID, "recheck")
	if rerr != nil {
		rerr.Outcome = err
		return false, rerr
	}
	if sold {
		return false, nil
	}
	if errors.Is(err, stock.ErrHoldExpired) {
		return true, nil
	}
	return false, err
}

// recordDeduct writes the order to the record. A refusal for want of units
// or quota (sold out, limit) is asked again once after Config.RecheckAfter:
// the gate may have sold a unit whose previous hold it returned a moment
// ago, and the reclaimer reverts the record's copy of that hold right
// after the gate returns it, so the unit may still be on its way back.
//
// An order with its own hold time is written as RecordOrder gives it (with
// Config.RecordGrace zero, its SKUs' hold times are read from the record
// first).
func (m *Manager) recordDeduct(ctx context.Context, o stock.Order) error {
	o, err := m.RecordOrder(ctx, o)
	if err != nil {
		return err
	}
	err = m.record.Deduct(ctx, o)
	if !errors.Is(err, stock.ErrSoldOut) && !errors.Is(err, stock.ErrLimitReached) {
		return err
	}
	wait := m.cfg.RecheckAfter
	if wait < 0 {
		return err
	}
	if wait == 0 {
		wait = defaultRecheckAfter
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return err
	case <-t.C:
	}
	return m.record.Deduct(ctx, o)
}

// endGateCopy ends the gate's copy of an order whose record copy ended
// first (or that the record refused), cause being the record's answer: a
// hold that expired there ends expired at the gate too (RevertHeld), so
// that the gate, asked later, says the hold expired as the record does,
// never that a Revert closed the order; a hold the record closed is
// reverted at the gate (read there first), and so is the hold of an order
// the record refused as new (it does not have it, so the gate has no sale
// of it). A sale the gate has of an order whose record copy ended (a
// Confirm that stopped between the tiers) is left as it is, as Revert
// leaves it (see returnGate): the record's units came back,
// reconciliation counts them back into the gate, and a refund there would
// pay them out twice. Its SKUs (skus, the order's) are reported to
// Config.OnDrift. known reports whether the gate knew the order.
func (m *Manager) endGateCopy(ctx context.Context, id string, skus []string, cause error) (known bool, _ error) {
	if errors.Is(cause, stock.ErrHoldExpired) {
		found, err := m.gate.RevertHeld(ctx, id)
		switch {
		case err != nil:
			return true, err
		case found == stock.StateUnknown:
			return false, nil
		case found == stock.StateConfirmed:
			m.gateSaleLeft(id, skus, cause)
		}
		return true, nil
	}
	if errors.Is(cause, stock.ErrOrderClosed) {
		g, err := m.gateOrder(ctx, id)
		switch {
		case err != nil:
			return true, err
		case g.State == stock.StateUnknown:
			return false, nil
		case g.State == stock.StateConfirmed:
			m.gateSaleLeft(id, skus, cause)
			return true, nil
		case g.State != stock.StateHeld:
			return true, nil // ended there already
		}
	}
	err := m.gate.Revert(ctx, id)
	if errors.Is(err, stock.ErrUnknownOrder) {
		return false, nil
	}
	return true, err
}

// gateSaleLeft reports to Config.OnDrift a sale the gate has of an order
// whose record copy ended (cause), left for reconciliation (see
// endGateCopy).
func (m *Manager) gateSaleLeft(id string, skus []string, cause error) {
	m.drift(Drift{OrderID: id, Tier: Gate, Op: "sale of an order the record returned", SKUs: skus, Err: cause})
}

// ended reports whether a gate answer means the order's hold is over there:
// expired, or closed by a Revert.
func ended(err error) bool {
	return errors.Is(err, stock.ErrHoldExpired) || errors.Is(err, stock.ErrOrderClosed)
}

// refusal reports whether a gate answer to Deduct refuses the order as a
// new one (sold out, limit, unknown SKU, conflict) rather than saying its
// hold ended.
func refusal(err error) bool {
	return stock.IsBusiness(err) && !ended(err) && !errors.Is(err, stock.ErrInvalid)
}

// refused answers a gate's refusal of an order. A gate that lost its data
// (a flush, a restart, then a rebuild) refuses a repeat of an order the
// record has as if it were new, so the record is asked (one read by order
// ID, paid by refused orders only). An order it does not know gets the
// gate's refusal. One it knows gets what a repeat gets by the contract:
// stock.ErrConflict for other items or user, in any state; else nil for a
// held or confirmed order (held at the record alone now; ReclaimExpired
// returns it at its gate deadline), stock.ErrHoldExpired for a
// hold past its gate deadline (its copy is returned) or an expired one,
// stock.ErrOrderClosed for a reverted one. A record that cannot be read
// leaves the answer unknown: a *TierError.
func (m *Manager) refused(ctx context.Context, o stock.Order, gerr error) error {
	in, err := m.recordOrder(ctx, o.ID)
	if err != nil {
		return &TierError{Tier: Record, Op: "read after the gate refused", Err: err, Outcome: gerr}
	}
	if in.State == stock.StateUnknown {
		return gerr
	}
	return m.repeat(ctx, o, in, gerr)
}

// repeat answers a Deduct of an order the record has (in, as read) by what
// a repeat gets by the contract, judging a held copy by its gate deadline
// (see refused); gerr is the gate's answer, if it was asked.
func (m *Manager) repeat(ctx context.Context, o stock.Order, in stock.OrderInfo, gerr error) error {
	// Identity before state, as on every backend: an ID reused for other
	// items or another user is a conflict whatever became of its order.
	if in.UserID != o.UserID || canon.Signature(canon.Sorted(o.Items)) != canon.Signature(canon.Sorted(in.Items)) {
		return stock.ErrConflict
	}
	if err := endedAnswer(in.State); err != nil {
		return err
	}
	if in.State != stock.StateHeld {
		return nil // confirmed
	}
	due, err := m.gateDeadline(ctx, in, nil)
	if err != nil {
		return &TierError{Tier: Record, Op: "read hold times", Err: err, Outcome: gerr}
	}
	if due.After(m.cfg.Clock.Now()) {
		return nil
	}
	sold, rerr := m.revertRecord(ctx, o.ID, "repeat")
	if rerr != nil {
		rerr.Outcome = stock.ErrHoldExpired
		return rerr
	}
	if sold {
		return nil // confirmed since the read: a repeat of a sale
	}
	m.returnedAtRecord(in)
	return stock.ErrHoldExpired
}

// returnedAtRecord reports to Config.OnDrift that the copy in, which the
// gate does not hold (it lost it, or never had it), went back at the
// record alone: the gate must get its units too.
func (m *Manager) returnedAtRecord(in stock.OrderInfo) {
	m.drift(Drift{OrderID: in.ID, Tier: Gate, Op: "return at the record alone", SKUs: skusOf(in.Items), Err: errReturnedAtRecord})
}

// returnCopy reverts the order's copy at the record, if it holds one, after
// the gate ended the hold. The record is read first (cheaper than a revert
// that finds nothing, the usual case: an order that expired in the queue
// never reached the record). A copy the record has confirmed is a sale
// (a Confirm decided by the record, the gate having lost the order): it is
// left alone, as by ReclaimExpired, reported to Config.OnDrift, and the
// state returned is stock.StateConfirmed. Otherwise it is the state the
// record had the copy in (stock.StateHeld for a copy it returned).
func (m *Manager) returnCopy(ctx context.Context, id string) (stock.State, error) {
	in, err := m.recordOrder(ctx, id)
	if err != nil {
		return stock.StateUnknown, &TierError{Tier: Record, Op: "read after the gate closed", Err: err}
	}
	if !in.State.Takes() {
		return in.State, nil
	}
	sold, rerr := m.revertRecord(ctx, id, "settle") // a confirmed copy is kept there
	if rerr != nil {
		return stock.StateUnknown, rerr
	}
	if sold {
		return stock.StateConfirmed, nil
	}
	return stock.StateHeld, nil
}

// errConfirmedCopy is the drift of a record copy found confirmed where the
// gate's hold had ended.
var errConfirmedCopy = errors.New("tiered: confirmed at the record, hold returned at the gate")

// revertRecord returns the order's copy at the record after the gate ended
// the hold, only while the copy is held (stock.HoldReverter: one step at the record). A copy found
// confirmed is a sale (a Confirm decided by the record landed between the
// caller's read and this step): it is kept, reported to Config.OnDrift as
// op, and sold says so. A failure is a *TierError (so the caller calls
// Settle again and this is retried); until then ReclaimExpired's
// follow-up, or at the latest the record's own deadline, bounds the copy's
// life.
func (m *Manager) revertRecord(ctx context.Context, id, op string) (sold bool, _ *TierError) {
	found, err := m.record.RevertHeld(ctx, id)
	if err != nil {
		return false, &TierError{Tier: Record, Op: "revert after the gate closed", Err: err}
	}
	if found == stock.StateConfirmed {
		m.drift(Drift{OrderID: id, Tier: Record, Op: op, Err: errConfirmedCopy})
		return true, nil
	}
	return false, nil
}
