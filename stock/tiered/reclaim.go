package tiered

import (
	"context"
	"errors"

	"github.com/stockguard/stockguard/stock"
)

// ReclaimExpired returns unpaid holds. The gate decides when a hold ends:
// its reclaimer returns at most limit due holds, and the record's copy of
// each of those orders is reverted at once (Revert is exactly-once, so two
// nodes reverting the same order, or a Settle's recheck doing it too, is
// harmless). Then the record's own reclaimer is drained: with the record's
// longer hold time (Config.RecordGrace) it finds only copies left behind by
// a node that stopped between the two steps, and orders taken at the record
// alone (by a fallback while the gate was down).
//
// A record that implements stock.OrderReader is asked first, and an order
// it has confirmed is not reverted: that sale was confirmed at the record
// while the gate could not be told (a degraded Confirm), it stands, and the
// units the gate returned are reported to Config.OnDrift for reconciliation
// to take back. A record without OrderReader has every copy reverted.
//
// It reports the lines the gate returned (the gate is the tier Levels
// reports), together with any error: a *TierError naming the tier that
// failed. When the gate fails, the record is still swept, so holds taken at
// the record alone keep expiring while the gate is down. A tier that does
// not implement stock.Reclaimer is skipped. RunReclaimer drives it like any
// reclaimer, on as many nodes as you like.
func (m *Manager) ReclaimExpired(ctx context.Context, limit int) ([]stock.Reclaimed, error) {
	if limit < 1 {
		return nil, &stock.InvalidError{Field: "limit", Reason: "must be at least 1"}
	}
	var got []stock.Reclaimed
	var errs []error
	if r, ok := m.gate.(stock.Reclaimer); ok {
		var err error
		if got, err = r.ReclaimExpired(ctx, limit); err != nil {
			errs = append(errs, &TierError{Tier: Gate, Op: "reclaim", Err: err})
		} else if err := m.revertCopies(ctx, got); err != nil {
			errs = append(errs, err)
		}
	}
	if r, ok := m.record.(stock.Reclaimer); ok {
		for {
			batch, err := r.ReclaimExpired(ctx, limit)
			if err != nil {
				errs = append(errs, &TierError{Tier: Record, Op: "reclaim", Err: err})
				break
			}
			if len(batch) < limit {
				break
			}
		}
	}
	return got, errors.Join(errs...)
}

// revertCopies reverts at the record the orders whose gate holds were
// returned, except those the record confirmed (see ReclaimExpired).
func (m *Manager) revertCopies(ctx context.Context, lines []stock.Reclaimed) error {
	if len(lines) == 0 {
		return nil
	}
	ids := make([]string, 0, len(lines))
	seen := make(map[string]bool, len(lines))
	for _, l := range lines {
		if !seen[l.OrderID] {
			seen[l.OrderID] = true
			ids = append(ids, l.OrderID)
		}
	}
	if rd, ok := m.record.(stock.OrderReader); ok {
		infos, err := rd.Orders(ctx, ids)
		if err != nil {
			return &TierError{Tier: Record, Op: "read reclaimed orders", Err: err}
		}
		ids = ids[:0]
		for _, in := range infos {
			switch in.State {
			case stock.StateHeld:
				ids = append(ids, in.ID)
			case stock.StateConfirmed:
				m.drift(Drift{OrderID: in.ID, Tier: Record, Op: "reclaim",
					Err: errors.New("tiered: confirmed at the record, hold returned at the gate")})
			}
			// Unknown: not recorded (yet); a racing Settle's recheck
			// reverts it. Reverted, refunded, expired: nothing to return.
		}
	}
	var errs []error
	for _, id := range ids {
		if err := m.record.Revert(ctx, id); err != nil && !errors.Is(err, stock.ErrUnknownOrder) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return &TierError{Tier: Record, Op: "revert reclaimed", Err: errors.Join(errs...)}
	}
	return nil
}
