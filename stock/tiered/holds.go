package tiered

import (
	"context"
	"errors"
	"time"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

var _ stock.HoldExtender = (*Manager)(nil)

// RecordListing returns the listing the record gets for l: its hold time
// is RecordHold's, and a MaxHoldTTL that l sets grows by the same grace
// (at most stock.MaxHoldTTL), so that every deadline the gate may give an
// order (its own hold time, an extension) has its record deadline that
// grace later. PutOnSale writes it; use it when putting a SKU on sale at
// the record alone.
func (m *Manager) RecordListing(l stock.Listing) stock.Listing {
	hold := l.EffectiveHoldTTL()
	rl := l
	rl.HoldTTL = m.RecordHold(hold)
	if l.MaxHoldTTL != 0 {
		rl.MaxHoldTTL = min(l.MaxHoldTTL+rl.HoldTTL-hold, stock.MaxHoldTTL)
	}
	return rl
}

// RecordOrder returns the order as the record receives it: an order with
// its own hold time (stock.Order.HoldTTL) asks the record for that time
// plus the grace RecordHold adds to the order's SKUs (at most
// stock.MaxHoldTTL), so the record's deadline is the gate's plus the
// grace, as for any order. With Config.RecordGrace zero the grace depends
// on the SKUs: their hold times are read from the record (one Levels per
// SKU), only for an order that sets HoldTTL.
//
// Near stock.MaxHoldTTL the cap makes the record's deadline less than the
// grace after the gate's, and a record copy the gate does not know (a
// gate that lost its data) is then returned up to that difference before
// its gate deadline; a copy the gate holds is kept to the gate's deadline.
func (m *Manager) RecordOrder(ctx context.Context, o stock.Order) (stock.Order, error) {
	if o.HoldTTL == 0 {
		return o, nil
	}
	g, err := m.grace(ctx, o.Items, nil)
	if err != nil {
		return o, err
	}
	o.HoldTTL = min(o.HoldTTL+g, stock.MaxHoldTTL)
	return o, nil
}

// RecordDeadline returns the deadline at the record of a held order whose
// gate deadline is deadline: deadline plus the grace RecordHold adds to
// the order's SKUs. With Config.RecordGrace zero it reads the order and
// its SKUs' hold times from the record (stock.ErrUnknownOrder if the record
// does not know the order). Package degrade uses it to extend at the
// record alone a hold a fallback took.
func (m *Manager) RecordDeadline(ctx context.Context, orderID string, deadline time.Time) (time.Time, error) {
	if m.cfg.RecordGrace > 0 {
		return deadline.Add(m.cfg.RecordGrace), nil
	}
	in, err := m.recordOrder(ctx, orderID)
	if err != nil {
		return time.Time{}, err
	}
	if in.State == stock.StateUnknown {
		return time.Time{}, stock.ErrUnknownOrder
	}
	g, err := m.grace(ctx, in.Items, nil)
	if err != nil {
		return time.Time{}, err
	}
	return deadline.Add(g), nil
}

// grace returns how much later the record's deadline of an order of items
// is than the gate's: Config.RecordGrace, or with zero the record hold
// time R of the order's SKUs (the shortest, as for the deadline) less
// GateHold(R), R read once per SKU through holds when it is not nil.
func (m *Manager) grace(ctx context.Context, items []stock.Item, holds map[string]time.Duration) (time.Duration, error) {
	if m.cfg.RecordGrace > 0 {
		return m.cfg.RecordGrace, nil
	}
	hold := stock.MaxHoldTTL
	for _, it := range items {
		h, ok := holds[it.SKU]
		if !ok {
			lv, err := m.record.Levels(ctx, it.SKU)
			if err != nil {
				return 0, err
			}
			h = lv.HoldTTL
			if holds != nil {
				holds[it.SKU] = h
			}
		}
		hold = min(hold, h)
	}
	return hold - m.GateHold(hold), nil
}

// ExtendHold implements stock.HoldExtender: it moves the order's deadline
// out to deadline at the gate, whose answer decides, then the record's to
// deadline plus the grace (see RecordDeadline), so the reclaimer and
// reconciliation read the new gate deadline back from the record's. It
// is idempotent: a repeat changes nothing at either tier, and a retry
// after an error finishes the job.
//
// The gate's refusals (stock.ErrHoldTooLong past the order's bound,
// ErrHoldExpired, ErrOrderConfirmed, ErrOrderClosed) are returned as they
// are, with nothing written. An order the gate does not know (it lost its
// data, or a fallback took the order while the gate was down: package
// degrade), or a gate that answers stock.ErrUnavailable, is decided by the
// record as Confirm decides it: a held copy whose gate deadline (see
// Orders) has passed is stock.ErrHoldExpired, one before it is extended at
// the record; ErrUnknownOrder when the record does not know it either. A
// gate that answered stock.ErrUnavailable may still hold the order (a
// call that failed, not data it lost) and keep its deadline, at which
// its reclaimer returns the order and Confirm refuses it: the gate
// decides when a hold ends. So the extension at the record is then
// answered with a *TierError, never nil: call again, and the order is
// extended once the gate is (or, once rebuilt, says it does not know the
// order). Meanwhile a Confirm the gate cannot answer for the order is
// decided by the record's extended deadline.
//
// Once the gate has extended the hold, a record that fails is a
// *TierError (call again); one that refuses (its copy ended or was
// confirmed since: a fallback's Revert or Confirm while the gate was
// down) is reported to Config.OnDrift and its answer returned. Without a
// Recorder, a record that does not have the order (its Deduct stopped
// after the gate) is a *TierError too: finish the Deduct, then call
// again. A record that refuses the deadline plus the grace as too long
// (the cap at stock.MaxHoldTTL, see RecordOrder) is extended to the gate's
// deadline itself. Decided at the record alone, the bound is the
// record's: within the grace of stock.MaxHoldTTL it is the listing's less
// the grace, and a deadline past it is stock.ErrHoldTooLong, nothing
// written (the record cannot tell it from one past the listing's own).
// With a Recorder, a hold extended before its hand-off is settled
// reaches the record with the record's hold time counted from the
// Settle; extend it again after Settle to carry the extension over. Its
// message keeps the deadline it was published with: the consumer asks
// HeldUntil before giving up on it, and retries it while the gate holds
// it (handoff.Consumer does).
func (m *Manager) ExtendHold(ctx context.Context, orderID string, deadline time.Time) (err error) {
	ctx, tr := m.obs.Track(ctx, "tiered", observe.OpExtendHold, 0)
	defer func() { tr.Done(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	gerr := m.gate.ExtendHold(ctx, orderID, deadline)
	switch {
	case errors.Is(gerr, stock.ErrUnknownOrder):
		return m.extendByRecord(ctx, orderID, deadline, gerr)
	case unavailable(gerr):
		// The gate may still hold the order with its old deadline (a
		// call that failed, not data it lost): extended at the record
		// alone, the order is not extended until the gate is too.
		if err := m.extendByRecord(ctx, orderID, deadline, gerr); err != nil {
			return err
		}
		return &TierError{Tier: Gate, Op: "extend hold", Err: gerr}
	case gerr != nil:
		return gerr
	}
	at, err := m.RecordDeadline(ctx, orderID, deadline)
	switch {
	case errors.Is(err, stock.ErrUnknownOrder):
		return m.notRecorded(orderID)
	case err != nil:
		return &TierError{Tier: Record, Op: "read hold times", Err: err}
	}
	rerr := m.record.ExtendHold(ctx, orderID, at)
	if errors.Is(rerr, stock.ErrHoldTooLong) {
		rerr = m.record.ExtendHold(ctx, orderID, deadline)
	}
	switch {
	case rerr == nil:
		return nil
	case errors.Is(rerr, stock.ErrUnknownOrder):
		return m.notRecorded(orderID)
	case stock.IsBusiness(rerr):
		m.drift(Drift{OrderID: orderID, Tier: Record, Op: "extend hold", Err: rerr})
		return rerr
	default:
		return &TierError{Tier: Record, Op: "extend hold", Err: rerr}
	}
}

// errNotRecorded is the record's answer to an extension of an order the
// gate holds and the record has not recorded, without a Recorder.
var errNotRecorded = errors.New("tiered: the record has not recorded the order (its Deduct is half-way: call Deduct again, then ExtendHold)")

// notRecorded answers an extension the gate applied to an order the record
// does not have. With a Recorder the order is pending: nil (see
// ExtendHold). Without one its Deduct stopped half-way, and the Deduct's
// retry would record it with the SKUs' hold time from then, so that the
// record's reclaimer (and Confirm, which reads the record first) would end
// it before the deadline told: a *TierError instead, which the caller
// retries once the Deduct is finished (the gate's repeat writes nothing,
// the record's extension lands).
func (m *Manager) notRecorded(orderID string) error {
	if m.cfg.Recorder != nil {
		return nil
	}
	return &TierError{Tier: Record, Op: "extend hold of " + orderID, Err: errNotRecorded}
}

// extendByRecord extends a hold the gate cannot decide about (gerr: it
// does not know the order, or lost its data) at the record, by the
// order's gate deadline, as confirmByRecord confirms one. Nothing was
// written at the gate, so the record's answer is the call's.
func (m *Manager) extendByRecord(ctx context.Context, id string, deadline time.Time, gerr error) error {
	in, err := m.recordOrder(ctx, id)
	if err != nil {
		return err
	}
	switch in.State {
	case stock.StateUnknown:
		return gerr
	case stock.StateConfirmed:
		return stock.ErrOrderConfirmed
	}
	if err := endedAnswer(in.State); err != nil {
		return err
	}
	g, err := m.grace(ctx, in.Items, nil)
	if err != nil {
		return err
	}
	if !in.Deadline.Add(-g).After(m.cfg.Clock.Now()) {
		return stock.ErrHoldExpired
	}
	return m.record.ExtendHold(ctx, id, deadline.Add(g))
}
