package tiered

import (
	"context"
	"time"

	"github.com/stockguard/stockguard/stock"
)

var _ stock.OrderReader = (*Manager)(nil)

// Orders implements stock.OrderReader: each order as the flow sees it,
// from one read of each tier. The record says whether an order is recorded
// and what it holds (the truth: its lines, and the units partial reverts
// gave back, Returned); the gate, where holds begin and end, says until
// when a held order holds (its deadline, own hold time and extensions
// included, without the grace the record adds) and whether and why a hold
// ended (a hold the gate ended is reported as the gate says, though the
// record's copy is still held or was returned after it; a hold the gate
// still has past its deadline, not reclaimed yet, is held, as on every
// backend, though a repeat Deduct returned the record's copy; a copy the
// record ended while the gate's hold still runs is expired, and Confirm
// answers stock.ErrHoldExpired). A held order's deadline is the earlier
// of the gate's and the record copy's own, so that an order reported held
// with its deadline ahead is one Confirm sells: the record's comes first
// only when the gate took a repeat of an order it had lost afresh, or an
// extension did not reach the record. An order the
// record does not know is reported as the gate sees it: one whose hand-off
// is pending or failed half-way is held at the gate alone. Either tier
// failing fails the call.
func (m *Manager) Orders(ctx context.Context, ids []string) ([]stock.OrderInfo, error) {
	out, err := m.record.Orders(ctx, ids)
	if err != nil {
		return nil, err
	}
	gate, err := m.gate.Orders(ctx, ids)
	if err != nil {
		return nil, err
	}
	holds := map[string]time.Duration{}
	now := m.cfg.Clock.Now()
	for i, r := range out {
		g := gate[i]
		// The gate decides whether and why a hold ended, for a record
		// copy that is held or that the flow returned as expired (when
		// the gate said the hold was over, or closed): such a copy is
		// reported as the gate has it, reverted, refunded, expired, or
		// held. An expired copy is reported held only past the gate's
		// deadline (a repeat Deduct returned it while the gate's hold
		// waits for its reclaimer, as the gate's Levels count it): one
		// the record ended while the gate's hold still runs (an
		// extension that did not reach the record) is expired, as
		// Confirm answers.
		gateDecides := g.State != stock.StateUnknown && g.State != stock.StateConfirmed &&
			(r.State != stock.StateExpired || g.State != stock.StateHeld || !g.Deadline.After(now))
		switch {
		case r.State == stock.StateUnknown:
			out[i] = g
		case (r.State == stock.StateHeld || r.State == stock.StateExpired) && gateDecides,
			r.State == stock.StateReverted && (g.State == stock.StateExpired || g.State == stock.StateRefunded):
			out[i].State, out[i].Deadline = g.State, g.Deadline
			if r.State == stock.StateHeld && g.State == stock.StateHeld && r.Deadline.Before(g.Deadline) {
				// The record's copy ends first (a gate that lost the
				// order took a repeat of it afresh, or an extension did
				// not reach the record): the record refuses a Confirm
				// from then on, so the hold runs until then.
				out[i].Deadline = r.Deadline
			}
		case r.State == stock.StateHeld:
			// The gate lost the hold (or has not got it back since a
			// rebuild), or confirmed it and the record has not followed
			// yet: its deadline is the record's less the grace.
			if out[i].Deadline, err = m.gateDeadline(ctx, r, holds); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// HeldUntil returns the deadline of the order's hold at the gate, which
// decides when a hold ends (extensions included), or the zero time when
// the gate does not hold the order (it does not know it, or the hold
// ended: a deadline that is not after the Manager's Clock has passed,
// reclaimed or not); an error when the gate cannot be read. It reads the gate alone
// (one read by order ID), so it answers while the record is down: the
// handoff Consumer asks it before giving up on an order it cannot record
// (handoff.HoldReader).
func (m *Manager) HeldUntil(ctx context.Context, orderID string) (time.Time, error) {
	in, err := m.gateOrder(ctx, orderID)
	if err != nil || in.State != stock.StateHeld || !in.Deadline.After(m.cfg.Clock.Now()) {
		return time.Time{}, err // a deadline passed: the hold ended, reclaimed or not
	}
	return in.Deadline, nil
}

// UserUnits implements stock.OrderReader with the record's count: the
// units of the user's recorded orders that are held or bought. An order
// held at the gate alone (its hand-off pending) is not in it; Orders
// reports such an order.
func (m *Manager) UserUnits(ctx context.Context, sku, userID string) (int64, error) {
	return m.record.UserUnits(ctx, sku, userID)
}

// recordOrder reads one order at the record (one read by ID); an order the
// record does not know has State stock.StateUnknown.
func (m *Manager) recordOrder(ctx context.Context, id string) (stock.OrderInfo, error) {
	return oneOrder(ctx, m.record, id)
}

// gateOrder is recordOrder at the gate.
func (m *Manager) gateOrder(ctx context.Context, id string) (stock.OrderInfo, error) {
	return oneOrder(ctx, m.gate, id)
}

// oneOrder reads order id from r; an order r does not know has State
// stock.StateUnknown.
func oneOrder(ctx context.Context, r stock.OrderReader, id string) (stock.OrderInfo, error) {
	infos, err := r.Orders(ctx, []string{id})
	if err != nil {
		return stock.OrderInfo{}, err
	}
	if len(infos) != 1 {
		return stock.OrderInfo{ID: id}, nil
	}
	return infos[0], nil
}

// endedAnswer is the answer to a repeat of an order the record has ended:
// stock.ErrHoldExpired for an expired copy, ErrOrderClosed for a reverted
// or refunded one, nil for any other state.
func endedAnswer(s stock.State) error {
	switch s {
	case stock.StateExpired:
		return stock.ErrHoldExpired
	case stock.StateReverted, stock.StateRefunded:
		return stock.ErrOrderClosed
	}
	return nil
}
