package tiered

import (
	"context"
	"errors"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

var _ stock.PartialReverter = (*Manager)(nil)

// RevertItems implements stock.PartialReverter: it gives back r.Items of a
// recorded order at the gate, then at the record, each once per r.OpID
// (the record's copy with the same OpID, so a retry applies nothing twice
// at either tier).
//
// The record is read first (one read by order ID, as Confirm does): an
// order it does not have is stock.ErrUnknownOrder and nothing changes,
// since the hand-off of a pending order (with a Recorder) would write the
// whole order at the record after a return at the gate alone; return its
// items after Settle. The gate's refusals (ErrExceedsOrder, ErrConflict,
// ErrHoldExpired, ErrOrderClosed) are returned as they are, with nothing
// written. An order the gate does not know (it lost its data, or a
// fallback took the order: package degrade), or a gate that answers
// stock.ErrUnavailable, is returned at the record alone, as
// [Fallback.RevertItems] does: by the order's gate deadline for a held one
// (stock.ErrHoldExpired once it has passed), and the units given back
// there are reported to Config.OnDrift with their SKUs. So is every
// return of an order the record gave units back of alone while the gate
// still counts them in a sale (behindRecord): a repeat of that return at
// the gate, or a new one, would give back units reconciliation counts
// back into the gate from the record.
//
// Once the gate has given the units back, a record that fails is a
// *TierError: call again with the same r, which finishes the job at the
// record. A record whose copy ended since (stock.ErrOrderClosed: the
// tiered reclaimer returned the rest at the gate's deadline between the
// two steps, or a fallback's Revert while the gate was down; or
// ErrHoldExpired, a copy past its deadline, which RevertItems then
// returns at the record as its reclaimer would) gives back everything it
// has, the units of r included: the return was applied, and the answer
// is nil (the retry's too), with the refusal reported to Config.OnDrift.
// A record that refuses otherwise (ErrExceedsOrder: a fallback returned
// units at the record alone) is reported to Config.OnDrift, with the
// SKUs, and its answer returned: the gate already sells the units again,
// and reconciliation brings it back to what the record says.
func (m *Manager) RevertItems(ctx context.Context, r stock.Return) (err error) {
	ctx, tr := m.obs.Track(ctx, "tiered", observe.OpRevertItems, len(r.Items))
	defer func() { tr.Done(err) }()
	if err := r.Validate(); err != nil {
		return err
	}
	in, err := m.recordOrder(ctx, r.OrderID)
	if err != nil {
		return err // a read: nothing written
	}
	if in.State == stock.StateUnknown {
		return stock.ErrUnknownOrder
	}
	if alone, err := m.behindRecord(ctx, in); alone || err != nil {
		if err != nil {
			return err
		}
		return m.revertItemsByRecord(ctx, in, r)
	}
	gerr := m.gate.RevertItems(ctx, r)
	switch {
	case errors.Is(gerr, stock.ErrUnknownOrder), unavailable(gerr):
		return m.revertItemsByRecord(ctx, in, r)
	case gerr != nil:
		return gerr
	}
	rerr := m.record.RevertItems(ctx, r)
	switch {
	case rerr == nil:
		return nil
	case ended(rerr):
		// The gate applied the return while it held the order (it decides),
		// and the record's copy ended since: it gives back all it has. A
		// copy past its deadline, which the record still counts as held,
		// is returned now, as its reclaimer would (until then the gate
		// would sell returned units the record does not have). The units
		// asked for are back at both tiers, once. The return was applied,
		// and a repeat of an applied return is nil.
		if errors.Is(rerr, stock.ErrHoldExpired) {
			if _, err := m.record.RevertHeld(ctx, r.OrderID); err != nil {
				return &TierError{Tier: Record, Op: "revert items", Err: err}
			}
		}
		m.drift(Drift{OrderID: r.OrderID, Tier: Record, Op: "revert items", Err: rerr, SKUs: skusOf(r.Items)})
		return nil
	case stock.IsBusiness(rerr):
		m.drift(Drift{OrderID: r.OrderID, Tier: Record, Op: "revert items", Err: rerr, SKUs: skusOf(r.Items)})
		return rerr
	default:
		return &TierError{Tier: Record, Op: "revert items", Err: rerr}
	}
}

// revertItemsByRecord returns r at the record alone, for an order the gate
// cannot decide about (see RevertItems); in is the record's order as read.
// Nothing was written at the gate, so the record's answer is the call's;
// the units given back are reported to Config.OnDrift with their SKUs.
func (m *Manager) revertItemsByRecord(ctx context.Context, in stock.OrderInfo, r stock.Return) error {
	if in.State == stock.StateHeld {
		due, err := m.gateDeadline(ctx, in, nil)
		if err != nil {
			return err
		}
		if !due.After(m.cfg.Clock.Now()) {
			return stock.ErrHoldExpired
		}
	}
	err := m.record.RevertItems(ctx, r)
	if err == nil {
		m.drift(Drift{OrderID: r.OrderID, Tier: Gate, Op: "revert items at the record alone", SKUs: skusOf(r.Items), Err: errReturnedAtRecord})
	}
	return err
}

// behindRecord reports whether a return of the order the record has as in
// goes by the record alone: the gate cannot be asked (stock.ErrUnavailable,
// as its return would answer), or its copy is a sale that misses units the
// record gave back alone (in.Returned has more of a line than the gate's
// copy: a return while the gate was down, or had lost the SKU's state).
// Reconciliation counts such units back into the gate from the record, so
// the gate's copy, which still counts them, must not give them back: a
// repeat of that return would, and so would a refund of the rest. A held
// copy is not behind: reconciliation counts a hold at the gate as units
// in flight, up to what the record still holds. The gate is read only for
// an order the record has given units back of; a read that fails
// otherwise is a *TierError, with nothing written.
func (m *Manager) behindRecord(ctx context.Context, in stock.OrderInfo) (bool, error) {
	if len(in.Returned) == 0 {
		return false, nil
	}
	g, err := m.gateOrder(ctx, in.ID)
	switch {
	case unavailable(err):
		return true, nil
	case err != nil:
		return false, &TierError{Tier: Gate, Op: "read", Err: err}
	case g.State != stock.StateConfirmed:
		return false, nil
	}
	gave := make(map[string]int64, len(g.Returned))
	for _, it := range g.Returned {
		gave[it.SKU] = it.Qty
	}
	for _, it := range in.Returned {
		if it.Qty > gave[it.SKU] {
			return true, nil
		}
	}
	return false, nil
}

// skusOf returns the SKUs of items, in item order.
func skusOf(items []stock.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.SKU
	}
	return out
}
