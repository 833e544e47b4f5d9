package tiered

import (
	"context"
	"errors"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// Fallback is the flow at its record alone: the stock.Manager that package
// degrade sends calls to while the gate cannot take them. Get it from
// [Manager.Fallback].
//
// It keeps the flow's rules without asking the gate. The gate decides
// when a hold ends, and the record's deadlines are the gate's plus the
// grace (see the package doc), so:
//
//   - Deduct records a new order at the record with the record's hold
//     time (RecordOrder) and reports its SKUs to Config.OnDrift (the gate
//     does not know the units are taken: reconciliation brings it down).
//     So does every other call that moves units at the record alone
//     (Revert of a hold, ReclaimExpired, PutOnSale, Restock): the gate
//     must be brought to agree once it takes traffic again. Units of a
//     sale, and every partial return, go back through the gate only:
//     Revert of a sale and RevertItems answer ErrWaitsForGate, nothing
//     written.
//     A repeat of an order the record has is answered as the flow answers
//     one whose gate lost it: nil while it is held before its gate
//     deadline or confirmed, stock.ErrHoldExpired past it (its copy is
//     returned), stock.ErrConflict for other items or user.
//   - Confirm and ExtendHold decide by the order's gate
//     deadline (the record's less the grace), as the flow does for an
//     order its gate does not know, so a buyer paying late is refused on
//     every node alike.
//   - PutOnSale writes the record's listing (RecordListing); Restock adds
//     at the record, under its operation ID, which reconciliation
//     completes at the gate.
//   - Available, Levels and Orders are the record's, with hold times and
//     deadlines as the gate would report them; ReclaimExpired runs the
//     record's own reclaimer (its deadline is the backstop while the gate
//     cannot be asked which copies it still holds).
//
// An order taken here is unknown to the gate: the flow's reclaimer returns
// it at its gate deadline once the gate answers again, and Confirm,
// Revert, RevertItems and ExtendHold through the flow decide it by the
// record as above. Orders written here move units at the record only; a
// gate that takes traffic again must first be brought into agreement
// (package reconcile, which package degrade runs before traffic returns).
type Fallback struct{ m *Manager }

var (
	_ stock.Manager         = (*Fallback)(nil)
	_ stock.Reclaimer       = (*Fallback)(nil)
	_ stock.OrderReader     = (*Fallback)(nil)
	_ stock.PartialReverter = (*Fallback)(nil)
	_ stock.HoldExtender    = (*Fallback)(nil)
)

// Fallback returns the flow at its record alone (see [Fallback]).
func (m *Manager) Fallback() *Fallback { return &Fallback{m: m} }

// Flow returns the flow f belongs to (nil for a nil f).
func (f *Fallback) Flow() *Manager {
	if f == nil {
		return nil
	}
	return f.m
}

// errRecordAlone is the drift of an order taken at the record alone.
var errRecordAlone = errors.New("tiered: taken at the record alone")

// errGateAside is what a Fallback tells the flow's record-side decisions
// the gate answered: it was not asked.
var errGateAside = errors.New("tiered: gate not asked")

// Deduct takes the order at the record alone (see Fallback).
func (f *Fallback) Deduct(ctx context.Context, o stock.Order) error {
	if err := o.Validate(); err != nil {
		return err
	}
	m := f.m
	in, err := m.recordOrder(ctx, o.ID)
	if err != nil {
		return err // a read: nothing written
	}
	if in.State != stock.StateUnknown {
		return m.repeat(ctx, o, in, nil)
	}
	ro, err := m.RecordOrder(ctx, o)
	if err != nil {
		return err
	}
	if err := m.record.Deduct(ctx, ro); err != nil {
		return err
	}
	m.drift(Drift{OrderID: o.ID, Tier: Record, Op: "deduct at the record alone", Err: errRecordAlone, SKUs: skusOf(o.Items)})
	return nil
}

// Confirm confirms the order at the record by its gate deadline (see
// Manager.Confirm for an order the gate does not know).
func (f *Fallback) Confirm(ctx context.Context, orderID string) error {
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	m := f.m
	in, err := m.recordOrder(ctx, orderID)
	if err != nil {
		return err
	}
	switch in.State {
	case stock.StateHeld:
		return m.confirmByRecord(ctx, in, errGateAside)
	case stock.StateConfirmed:
		return nil
	case stock.StateUnknown:
		return stock.ErrUnknownOrder
	}
	return m.record.Confirm(ctx, orderID)
}

// Revert cancels a held order at the record (past the order's gate
// deadline it ends expired, see Manager.Revert). A hold the gate may still
// have for it ends at its gate deadline, and the flow's reclaimer finds
// the record's copy reverted already. The units come back at the record
// alone: the order's SKUs are reported to Config.OnDrift (revertByRecord).
// A sale is refunded through the gate only (see Manager.Revert): its
// refund answers ErrWaitsForGate, with nothing written.
func (f *Fallback) Revert(ctx context.Context, orderID string) error {
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	in, err := f.m.recordOrder(ctx, orderID)
	if err != nil {
		return err
	}
	if in.State == stock.StateConfirmed {
		return ErrWaitsForGate
	}
	return f.m.revertByRecord(ctx, in)
}

// revertByRecord reverts the order at the record alone; in is the
// record's order as read. The SKUs of an order the record knew are
// reported to Config.OnDrift, by a repeat too (an earlier call whose reply
// was lost may have returned them unreported).
func (m *Manager) revertByRecord(ctx context.Context, in stock.OrderInfo) error {
	expired := false
	if in.State == stock.StateHeld {
		due, err := m.gateDeadline(ctx, in, nil)
		if err != nil {
			return err // a read: nothing written
		}
		expired = !due.After(m.cfg.Clock.Now())
	}
	err := m.endRecordCopy(ctx, in.ID, expired)
	if err == nil && in.State != stock.StateUnknown {
		m.drift(Drift{OrderID: in.ID, Tier: Gate, Op: "revert at the record alone", SKUs: skusOf(in.Items), Err: errReturnedAtRecord})
	}
	return err
}

// RevertItems answers ErrWaitsForGate (stock.ErrUnknownOrder for an order
// the record does not have), with nothing written: the record
// path cannot tell whether the gate has a copy of the order (the gate may
// have taken it again since the fallback did), and units given back at
// the record alone would be given back again by that copy. The flow's
// RevertItems returns at the record alone an order its gate says it does
// not know (package degrade sends the call there).
func (f *Fallback) RevertItems(ctx context.Context, r stock.Return) error {
	if err := r.Validate(); err != nil {
		return err
	}
	in, err := f.m.recordOrder(ctx, r.OrderID)
	switch {
	case err != nil:
		return err
	case in.State == stock.StateUnknown:
		return stock.ErrUnknownOrder
	}
	return ErrWaitsForGate
}

// ExtendHold extends a held order at the record to deadline plus the
// grace, by the order's gate deadline (see Manager.ExtendHold).
func (f *Fallback) ExtendHold(ctx context.Context, orderID string, deadline time.Time) error {
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	return f.m.extendByRecord(ctx, orderID, deadline, stock.ErrUnknownOrder)
}

// PutOnSale puts the SKU on sale at the record with the record's listing
// (RecordListing), and reports the SKU to Config.OnDrift. A listing that
// names a bucket count (Buckets above 0) for a gate that keeps one per SKU
// (ListingChecker.KeepsBuckets: redisstock on a Redis Cluster) is not
// written: the record has no bucket count, and a gate rebuilt from it
// would keep the SKU in one bucket. It gets an error matching
// stock.ErrUnavailable, nothing written: put it on sale through the flow
// once the gate answers, or with Buckets 0, which keeps the SKU's count.
func (f *Fallback) PutOnSale(ctx context.Context, l stock.Listing) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if l.Buckets > 0 && f.m.gate.KeepsBuckets() {
		return errBucketsWaitForGate
	}
	err := f.m.record.PutOnSale(ctx, f.m.RecordListing(l))
	if err == nil {
		f.m.drift(Drift{Tier: Gate, Op: "put on sale at the record alone", SKUs: []string{l.SKU}, Err: errRecordAlone})
	}
	return err
}

// Restock adds the units at the record, once per r.OpID, and reports the
// SKU to Config.OnDrift (reconciliation completes the restock at the gate
// by its operation ID).
func (f *Fallback) Restock(ctx context.Context, r stock.Restock) error {
	err := f.m.record.Restock(ctx, r)
	if err == nil {
		f.m.drift(Drift{Tier: Gate, Op: "restock at the record alone", SKUs: []string{r.SKU}, Err: errRecordAlone})
	}
	return err
}

// Available is the record's available count.
func (f *Fallback) Available(ctx context.Context, sku string) (int64, error) {
	return f.m.record.Available(ctx, sku)
}

// Levels are the record's, with the hold times the gate has for them.
func (f *Fallback) Levels(ctx context.Context, sku string) (stock.Levels, error) {
	lv, err := f.m.record.Levels(ctx, sku)
	if err != nil {
		return lv, err
	}
	grace := lv.HoldTTL - f.m.GateHold(lv.HoldTTL)
	lv.HoldTTL -= grace
	lv.MaxHoldTTL = max(lv.MaxHoldTTL-grace, lv.HoldTTL)
	return lv, nil
}

// Orders are the record's, a held order's deadline being its gate
// deadline.
func (f *Fallback) Orders(ctx context.Context, ids []string) ([]stock.OrderInfo, error) {
	out, err := f.m.record.Orders(ctx, ids)
	if err != nil {
		return nil, err
	}
	holds := map[string]time.Duration{}
	for i, in := range out {
		if in.State == stock.StateHeld {
			if out[i].Deadline, err = f.m.gateDeadline(ctx, in, holds); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// UserUnits is the record's count.
func (f *Fallback) UserUnits(ctx context.Context, sku, userID string) (int64, error) {
	return f.m.record.UserUnits(ctx, sku, userID)
}

// ReclaimExpired runs the record's own reclaimer: copies past the
// record's deadline, the backstop while the gate cannot be asked. Their
// orders are reported to Config.OnDrift (returned at the record alone).
func (f *Fallback) ReclaimExpired(ctx context.Context, limit int) ([]stock.Reclaimed, error) {
	got, err := f.m.record.ReclaimExpired(ctx, limit)
	f.m.returnedAlone(got)
	return got, err
}
