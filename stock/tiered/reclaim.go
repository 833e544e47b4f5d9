package tiered

import (
	"context"
	"errors"

	"github.com/stockguard/stockguard/stock"
)

// reclaimChunk is the most holds the gate is asked to return at a time
// before their copies are reverted at the record: between the two, the
// gate may sell a returned unit again that the record still holds, so the
// window is kept to a few record round trips (and Settle asks the record
// twice before a refusal stands, Config.RecheckAfter).
const reclaimChunk = 4

// ReclaimExpired returns unpaid holds. The gate decides when a hold ends:
// its reclaimer returns at most limit due holds, in chunks of 4, and the
// record's copy of each of those orders is reverted right after its chunk
// (Revert is exactly-once, so two nodes reverting the same order, or a
// Settle's recheck doing it too, is harmless). Then the record's own reclaimer is drained: with the record's
// longer hold time (Config.RecordGrace) it finds only copies left behind by
// a node that stopped between the two steps, and orders taken at the record
// alone (by a fallback while the gate was down).
//
// A record that implements stock.OrderReader is asked first, and an order
// it has confirmed is not reverted: that sale was confirmed at the record
// while the gate could not be told (a degraded Confirm), it stands, and the
// units the gate returned are reported to Config.OnDrift for reconciliation
// to take back (Drift.SKUs names the SKUs). A Confirm in progress at the
// deadline (record confirmed, gate not yet asked) is reported the same
// way, and undoes the record's confirm itself when the gate answers that
// the hold expired: a drift report is a cue to reconcile, not proof. A
// record without OrderReader has every copy reverted.
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
		for len(got) < limit {
			n := min(limit-len(got), reclaimChunk)
			batch, err := r.ReclaimExpired(ctx, n)
			got = append(got, batch...)
			if err == nil {
				err = m.revertCopies(ctx, batch)
			} else {
				err = errors.Join(&TierError{Tier: Gate, Op: "reclaim", Err: err}, m.revertCopies(ctx, batch))
			}
			if err != nil {
				errs = append(errs, err)
				break
			}
			if len(batch) < n {
				break
			}
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
	skus := make(map[string][]string, len(lines))
	for _, l := range lines {
		if _, seen := skus[l.OrderID]; !seen {
			ids = append(ids, l.OrderID)
		}
		skus[l.OrderID] = append(skus[l.OrderID], l.SKU)
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
				m.drift(Drift{OrderID: in.ID, Tier: Record, Op: "reclaim", SKUs: skus[in.ID],
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
