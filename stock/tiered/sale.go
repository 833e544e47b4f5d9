package tiered

import (
	"context"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// PutOnSale puts the SKU on sale at the record, then at the gate. The gate
// gets the listing as it is; the record gets it with a longer hold time
// (RecordHold), so that the gate's deadline always comes first. It is
// idempotent: after a *TierError naming the gate, call it again.
func (m *Manager) PutOnSale(ctx context.Context, l stock.Listing) error {
	if err := l.Validate(); err != nil {
		return err
	}
	rl := l
	rl.HoldTTL = m.RecordHold(l.EffectiveHoldTTL())
	if err := m.record.PutOnSale(ctx, rl); err != nil {
		return err
	}
	if err := m.gate.PutOnSale(ctx, l); err != nil {
		return &TierError{Tier: Gate, Op: "put on sale", Err: err}
	}
	return nil
}

// RecordHold returns the record's hold time for a gate hold time: gate plus
// Config.RecordGrace (default: gate again), at most stock.MaxHoldTTL. Use
// it when putting a SKU on sale at the record alone.
func (m *Manager) RecordHold(gate time.Duration) time.Duration {
	grace := m.cfg.RecordGrace
	if grace <= 0 {
		grace = gate
	}
	return min(gate+grace, stock.MaxHoldTTL)
}

// GateHold is RecordHold's inverse: the gate hold time whose record hold is
// record (at least a millisecond). Reconciliation uses it to rebuild a
// flushed gate from the record (reconcile.Config.GateHold).
func (m *Manager) GateHold(record time.Duration) time.Duration {
	if m.cfg.RecordGrace <= 0 {
		return max(record/2, time.Millisecond)
	}
	return max(record-m.cfg.RecordGrace, time.Millisecond)
}

// Restock adds units at the record, then at the gate. Restock is not
// idempotent: a *TierError naming the gate means the record has the units
// and the gate does not; do not call Restock again, restock the gate alone
// (m.Gate().Restock) or let reconciliation repair it.
func (m *Manager) Restock(ctx context.Context, r stock.Restock) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if err := m.record.Restock(ctx, r); err != nil {
		return err
	}
	if err := m.gate.Restock(ctx, r); err != nil {
		return &TierError{Tier: Gate, Op: "restock", Err: err}
	}
	return nil
}

// Available returns the gate's available units (the fast path).
func (m *Manager) Available(ctx context.Context, sku string) (int64, error) {
	return m.gate.Available(ctx, sku)
}

// Levels returns the gate's levels. Ask Record() for the record's.
func (m *Manager) Levels(ctx context.Context, sku string) (stock.Levels, error) {
	return m.gate.Levels(ctx, sku)
}

func (m *Manager) drift(d Drift) {
	if m.cfg.OnDrift != nil {
		m.cfg.OnDrift(d)
	}
}
