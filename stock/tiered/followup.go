package tiered

import (
	"context"
	"errors"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// followUp is step 2 of ReclaimExpired: it returns at the record the
// copies whose gate hold ended without the record being told. See
// ReclaimExpired.
func (m *Manager) followUp(ctx context.Context, limit int) error {
	now := m.cfg.Clock.Now()
	held, err := m.record.HeldBefore(ctx, now.Add(m.maxGrace()), limit)
	if err != nil {
		return &TierError{Tier: Record, Op: "list held copies", Err: err}
	}
	var errs []error
	holds := map[string]time.Duration{}
	var ids []string
	for _, in := range held {
		due, err := m.gateDeadline(ctx, in, holds)
		if err != nil {
			errs = append(errs, &TierError{Tier: Record, Op: "read hold times", Err: err})
			continue
		}
		if !due.After(now) {
			ids = append(ids, in.ID)
		}
	}
	if len(ids) == 0 {
		return errors.Join(errs...)
	}
	at, err := m.gate.Orders(ctx, ids)
	if err != nil {
		return errors.Join(append(errs, &TierError{Tier: Gate, Op: "read held copies", Err: err})...)
	}
	ids = ids[:0]
	var alone []string // copies the gate does not know: returned at the record alone
	for _, g := range at {
		switch g.State {
		case stock.StateHeld:
		case stock.StateConfirmed:
			if err := m.finishConfirm(ctx, g.ID); err != nil {
				errs = append(errs, err)
			}
		case stock.StateUnknown:
			alone = append(alone, g.ID)
			ids = append(ids, g.ID)
		default:
			ids = append(ids, g.ID)
		}
	}
	skus := make(map[string][]string, len(held))
	for _, in := range held {
		skus[in.ID] = skusOf(in.Items)
	}
	// Each copy is returned only while it is held: one confirmed since
	// the listing is a sale (its Confirm asked the gate too), and is kept.
	if err := m.revertAll(ctx, ids, skus, "revert held copies"); err != nil {
		errs = append(errs, err)
	}
	for _, id := range alone {
		m.drift(Drift{OrderID: id, Tier: Gate, Op: "reclaim", SKUs: skus[id], Err: errReturnedAtRecord})
	}
	return errors.Join(errs...)
}

// finishConfirm finishes a Confirm that stopped between the gate
// (confirmed) and the record (held): the buyer paid, so the record's copy
// is confirmed too; its own deadline is later than the gate's. When the
// record refuses because the copy ended first (its deadline passed before
// a follow-up ran: a RecordGrace shorter than the reclaimers' interval, or
// a cancel at the record alone), the order is no sale at the truth, and
// the gate's confirm is undone, as Confirm does (closedAtRecord). Left
// confirmed at the gate, the units would count as sold there alone: a
// reconcile pass brings the gate's available up to the record's, and a
// later Revert of the order (a refund at the gate) would give them back a
// second time.
func (m *Manager) finishConfirm(ctx context.Context, id string) error {
	err := m.record.Confirm(ctx, id)
	switch {
	case err == nil:
		return nil
	case ended(err):
		if gerr := m.gate.Revert(ctx, id); gerr != nil {
			m.drift(Drift{OrderID: id, Tier: Record, Op: "finish confirm", Err: err})
			return &TierError{Tier: Gate, Op: "revert after the record closed", Err: gerr, Outcome: err}
		}
		return nil
	case stock.IsBusiness(err):
		m.drift(Drift{OrderID: id, Tier: Record, Op: "finish confirm", Err: err})
		return nil
	default:
		return &TierError{Tier: Record, Op: "finish confirm", Err: err}
	}
}

// maxGrace is the most RecordHold adds to any gate hold time: how far
// past now the record's deadline of a copy whose gate hold has ended can
// be.
func (m *Manager) maxGrace() time.Duration {
	if m.cfg.RecordGrace > 0 {
		return m.cfg.RecordGrace
	}
	return stock.MaxHoldTTL - m.GateHold(stock.MaxHoldTTL)
}

// gateDeadline returns when the gate's hold of a record copy ends: the
// record's deadline minus the grace (see grace) RecordHold added to the
// order's hold time, which RecordOrder adds to an order's own hold time
// and ExtendHold to an extended deadline as well. With Config.RecordGrace
// set that grace is RecordGrace; without, it is found from the record's
// hold time of the order's SKUs (the shortest decides, as for the
// deadline), read once per SKU through holds when it is not nil. The
// answer is early only for deadlines near stock.MaxHoldTTL from the
// Deduct, where the record's deadline is capped.
func (m *Manager) gateDeadline(ctx context.Context, in stock.OrderInfo, holds map[string]time.Duration) (time.Time, error) {
	g, err := m.grace(ctx, in.Items, holds)
	if err != nil {
		return time.Time{}, err
	}
	return in.Deadline.Add(-g), nil
}
