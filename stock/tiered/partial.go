package tiered

import (
	"context"
	"errors"
	"slices"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

var _ stock.PartialReverter = (*Manager)(nil)

// RevertItems implements stock.PartialReverter: it gives back r.Items of a
// recorded order at the gate, then at the record, each once per r.OpID
// (the record's copy with the same OpID, so a retry applies nothing twice
// at either tier).
//
// The units of an order the gate has go back through the gate, never at
// the record alone: reconciliation counts what the record gives back into
// the gate, and a copy the gate still had would give the same units back
// again later (a retry of the return, or a refund of the rest). So a gate
// that cannot be asked (stock.ErrUnavailable) is the answer, with nothing
// written: call again once it is back (a Shop's Run rebuilds a gate that
// lost a SKU). Only an order the gate does not know (it lost its data, or
// a fallback took the order: package degrade) is returned at the record
// alone, and one whose hold ended at the gate while the record sold it (a
// Confirm at the record alone): by the order's gate deadline for a held
// one (stock.ErrHoldExpired once it has passed); the units given back
// there are reported to Config.OnDrift with their SKUs.
//
// The record is read first (one read by order ID, as Confirm does): an
// order it does not have is stock.ErrUnknownOrder and nothing changes,
// since the hand-off of a pending order (with a Recorder) would write the
// whole order at the record after a return at the gate alone; return its
// items after Settle. An order the record has returned already (reverted,
// refunded or expired there) is answered as it ended there
// (stock.ErrOrderClosed, stock.ErrHoldExpired; nil for a repeat of a
// return applied before, stock.ErrConflict for its OpID with other items,
// as the gate says, or the record when the gate does not know the order):
// a hold the gate still has for it ends there too, and a sale the gate
// has is left as it is, its units
// reconciliation's, as Revert leaves them (returnGate). A return of an
// order the gate took again after the record gave units of it back alone
// goes by the record alone (lags). The gate's refusals
// (ErrExceedsOrder, ErrConflict,
// ErrHoldExpired, ErrOrderClosed) are returned as they are, with nothing
// written.
//
// Once the gate has given the units back, a record that fails is a
// *TierError: call again with the same r, which finishes the job at the
// record. A record whose copy ended since (stock.ErrOrderClosed: the
// tiered reclaimer returned the rest at the gate's deadline between the
// two steps, or a fallback's Revert of the hold while the gate was down;
// or ErrHoldExpired, a copy past its deadline, which RevertItems then
// returns at the record as its reclaimer would) gives back everything it
// has, the units of r included: the return was applied, and the answer
// is nil (the retry's too), with the refusal reported to Config.OnDrift.
// A record that refuses otherwise is reported to Config.OnDrift, with the
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
	if done := endedAnswer(in.State); done != nil {
		return m.returnEnded(ctx, in, r, done)
	}
	behind, err := m.lagging(ctx, in, stock.StateConfirmed, stock.StateHeld)
	if err != nil {
		return err // a read: nothing written
	}
	if behind {
		return m.revertItemsByRecord(ctx, in, r)
	}
	gerr := m.gate.RevertItems(ctx, r)
	switch {
	case errors.Is(gerr, stock.ErrUnknownOrder), ended(gerr) && in.State == stock.StateConfirmed:
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
		m.recordRefused(r, rerr)
		return nil
	case stock.IsBusiness(rerr):
		m.recordRefused(r, rerr)
		return rerr
	default:
		return &TierError{Tier: Record, Op: "revert items", Err: rerr}
	}
}

// returnEnded answers a return of an order the record has ended (in, done
// its answer for the state it ended in) by the gate's copy. A repeat of a
// return the gate applied before the record's copy ended is nil: the gate
// answers it nil and gives nothing more back, and the OpID of one it
// applied with other items is stock.ErrConflict; a gate that does not know
// the order leaves both answers to the record, which remembers the OpIDs
// it applied. Any other return is answered done: a hold the gate still
// has ends there too, as Revert ends it (returnGate; a new return the gate just applied to it is part of that
// end), and a sale is left as it is.
func (m *Manager) returnEnded(ctx context.Context, in stock.OrderInfo, r stock.Return, done error) error {
	g, err := m.gateOrder(ctx, r.OrderID)
	switch {
	case err != nil:
		return err // a read: nothing written
	case g.State == stock.StateHeld:
		gerr := m.gate.RevertItems(ctx, r)
		if gerr == nil {
			if again, err := m.gateOrder(ctx, r.OrderID); err == nil && covers(g.Returned, again.Returned) {
				// A repeat (it gave nothing more back), reported again:
				// the call that applied it may have stopped before it
				// reported the record's end.
				m.recordRefused(r, done)
				return nil
			}
		}
		if err := m.returnGate(ctx, in); err != nil {
			return err
		}
		if errors.Is(gerr, stock.ErrConflict) {
			return gerr
		}
		return done
	case g.State == stock.StateConfirmed:
		return done
	}
	switch gerr := m.gate.RevertItems(ctx, r); {
	case gerr == nil: // a repeat: applied while the order was held
		m.recordRefused(r, done)
		return nil
	case errors.Is(gerr, stock.ErrConflict):
		// The OpID was applied with other items: identity before state,
		// as on every backend.
		return gerr
	case errors.Is(gerr, stock.ErrUnknownOrder):
		// The gate does not know the order (it lost its data, or a
		// fallback took the order): the record's memory of OpIDs
		// answers, as every backend does: nil for a repeat of a return
		// it applied, stock.ErrConflict for its OpID with other items.
		// It gives nothing back for an order it ended.
		switch rerr := m.record.RevertItems(ctx, r); {
		case rerr == nil, errors.Is(rerr, stock.ErrConflict), !stock.IsBusiness(rerr):
			return rerr
		}
	}
	return done
}

// revertItemsByRecord returns r at the record alone, for an order the gate
// has no copy of, or only an ended one (see RevertItems); in is the
// record's order as read.
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

// lags reports whether the gate's copy g of the order the record has as
// in misses units the record gave back: in.Returned has more of a line
// than g.Returned. Returns at the record alone are made only of orders the
// gate does not know, so a copy lags only when the gate took the order
// again after them (a repeat Deduct through a gate that lost the order,
// or of an order a fallback took). Reconciliation counts those units into
// the gate from the record (or, while the gate holds the order, as units
// in flight), so a copy that lags gives nothing back at the gate: a
// sale's returns and refund, and a hold's returns, go by the record alone
// (the record decides what is left to return; the hold ends whole).
func lags(in, g stock.OrderInfo) bool {
	return !covers(g.Returned, in.Returned)
}

// lagging reports whether the gate's copy of the order the record has as
// in is in one of states and lags it (lags). The gate is read only for an
// order the record has given units back of; a failed read is returned.
func (m *Manager) lagging(ctx context.Context, in stock.OrderInfo, states ...stock.State) (bool, error) {
	if len(in.Returned) == 0 {
		return false, nil
	}
	g, err := m.gateOrder(ctx, in.ID)
	if err != nil {
		return false, err
	}
	return slices.Contains(states, g.State) && lags(in, g), nil
}

// recordRefused reports to Config.OnDrift the record's refusal err of a
// return r that the gate applied.
func (m *Manager) recordRefused(r stock.Return, err error) {
	m.drift(Drift{OrderID: r.OrderID, Tier: Record, Op: "revert items", Err: err, SKUs: skusOf(r.Items)})
}

// covers reports whether returned has at least each of items' units.
func covers(returned, items []stock.Item) bool {
	gave := make(map[string]int64, len(returned))
	for _, it := range returned {
		gave[it.SKU] = it.Qty
	}
	for _, it := range items {
		if gave[it.SKU] < it.Qty {
			return false
		}
	}
	return true
}

// skusOf returns the SKUs of items, in item order.
func skusOf(items []stock.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.SKU
	}
	return out
}
