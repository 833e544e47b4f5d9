package tiered

import (
	"context"
	"errors"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// reclaimChunk is the most holds the gate is asked to return at a time
// before their copies are reverted at the record: between the two, the
// gate may sell a returned unit again that the record still holds, so the
// window is kept to a few record round trips (and Settle asks the record
// twice before a refusal stands, Config.RecheckAfter).
const reclaimChunk = 4

// ReclaimExpired returns unpaid holds, in three steps.
//
//  1. The gate decides when a hold ends: its reclaimer returns at most
//     limit due holds, in chunks of 4, and the record's copy of each of
//     those orders is reverted right after its chunk (Revert is
//     exactly-once, so two nodes reverting the same order, or a Settle's
//     recheck doing it too, is harmless).
//  2. The follow-up: the record lists (stock.HoldLister) at most limit
//     copies it still holds whose gate deadline has passed (the record's
//     deadline minus the grace RecordHold adds), the gate is asked about
//     them (stock.OrderReader), and each one the gate no longer holds or
//     sold (expired, reverted, or unknown to it past that deadline) is
//     reverted at the record. This returns the copies whose end step 1
//     never reported: a revert at the record that failed, a reclaim reply
//     that was lost, a node that stopped between the two. One failure
//     costs a pass, not the copy's whole record hold time. A copy the
//     gate has confirmed (a Confirm that stopped between the gate and the
//     record) is confirmed at the record: the buyer paid. If the record
//     refuses, its copy having ended first (past its own deadline), the
//     gate's confirm is undone: the order is no sale at either tier.
//  3. The record's own reclaimer is drained: with the record's longer
//     hold time (Config.RecordGrace) it finds only what the first two
//     steps could not return (the gate down for long, say).
//
// The record is asked about the orders of step 1 first, and an order it
// has confirmed is not reverted: that sale was confirmed at the record
// alone (a fallback's Confirm while the gate was set aside; Confirm itself
// confirms at the record only what the gate confirmed or holds nothing
// of), it stands, and the units the gate returned are reported to
// Config.OnDrift for
// reconciliation to take back (Drift.SKUs names the SKUs). A Confirm in
// progress at the deadline is reported the same way (a drift report is a
// cue to reconcile, not proof). Step 2 leaves alone every copy the gate
// holds or has confirmed. Both steps return a copy only while the record
// still holds it (stock.HoldReverter: one step at the record), so a copy
// confirmed meanwhile is kept, not refunded, and reported to
// Config.OnDrift.
//
// Orders taken at the record alone (a fallback while the gate was down)
// are unknown to the gate, so step 2 returns them once their gate deadline
// (the listing's hold time) has passed.
//
// It reports the lines the gate returned (the gate is the tier Levels
// reports), together with any error: a *TierError naming the tier that
// failed, except when nothing was written (the gate's first answer is
// from before it wrote, as a context already over or a refused dial are,
// and the record's sweep then reported nothing and failed, if it did,
// with an error that does not leave its outcome unknown): then each
// tier's error is returned as the tier gave it, as by every call of the
// flow. When the
// gate fails, the record is still swept (step 3), so holds taken at the
// record alone keep expiring while the gate is down.
// RunReclaimer drives it like any reclaimer, on as many nodes as you like.
func (m *Manager) ReclaimExpired(ctx context.Context, limit int) (_ []stock.Reclaimed, err error) {
	ctx, tr := m.obs.Track(ctx, "tiered", observe.OpReclaim, 0)
	defer func() { tr.Done(err) }()
	if limit < 1 {
		return nil, &stock.InvalidError{Field: "limit", Reason: "must be at least 1"}
	}
	var got []stock.Reclaimed
	var errs []error
	var first error // the gate's first answer, when it wrote nothing
	gateOK := true
	for len(got) < limit {
		n := min(limit-len(got), reclaimChunk)
		batch, err := m.gate.ReclaimExpired(ctx, n)
		got = append(got, batch...)
		if err != nil {
			gateOK = false
			if len(got) == 0 && !errors.Is(err, stock.ErrUnknownOutcome) {
				first = err
				break
			}
			err = errors.Join(&TierError{Tier: Gate, Op: "reclaim", Err: err}, m.revertCopies(ctx, batch))
		} else {
			err = m.revertCopies(ctx, batch)
		}
		if err != nil {
			errs = append(errs, err)
			break
		}
		if len(batch) < n {
			break
		}
	}
	if gateOK {
		if err := m.followUp(ctx, limit); err != nil {
			errs = append(errs, err)
		}
	}
	swept, err := m.drainRecord(ctx, limit)
	if first != nil {
		if swept == 0 && !errors.Is(err, stock.ErrUnknownOutcome) {
			// Nothing was written: each tier's answer as it gave it. A
			// sweep whose reply was lost may have returned copies it
			// could not report, and the call's outcome is unknown.
			return got, errors.Join(first, err)
		}
		errs = append(errs, &TierError{Tier: Gate, Op: "reclaim", Err: first})
	}
	if err != nil {
		errs = append(errs, &TierError{Tier: Record, Op: "reclaim", Err: err})
	}
	return got, errors.Join(errs...)
}

// errReturnedAtRecord is the drift of units returned at the record alone.
var errReturnedAtRecord = errors.New("tiered: returned at the record alone")

// drainRecord runs the record's own reclaimer until a pass returns fewer
// than limit lines. What it returns goes back at the record alone (the
// gate never had it, or lost it): each order is reported to
// Config.OnDrift with its SKUs, for reconciliation to give the gate the
// units too.
// It returns how many lines it returned.
func (m *Manager) drainRecord(ctx context.Context, limit int) (int, error) {
	n := 0
	for {
		batch, err := m.record.ReclaimExpired(ctx, limit)
		m.returnedAlone(batch)
		n += len(batch)
		if err != nil || len(batch) < limit {
			return n, err
		}
	}
}

// returnedAlone reports the orders of lines returned at the record alone.
func (m *Manager) returnedAlone(lines []stock.Reclaimed) {
	if m.cfg.OnDrift == nil {
		return
	}
	skus := map[string][]string{}
	var ids []string
	for _, l := range lines {
		if _, seen := skus[l.OrderID]; !seen {
			ids = append(ids, l.OrderID)
		}
		skus[l.OrderID] = append(skus[l.OrderID], l.SKU)
	}
	for _, id := range ids {
		m.drift(Drift{OrderID: id, Tier: Gate, Op: "reclaim", SKUs: skus[id], Err: errReturnedAtRecord})
	}
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
	infos, err := m.record.Orders(ctx, ids)
	if err != nil {
		return &TierError{Tier: Record, Op: "read reclaimed orders", Err: err}
	}
	ids = ids[:0]
	for _, in := range infos {
		switch in.State {
		case stock.StateHeld:
			ids = append(ids, in.ID)
		case stock.StateConfirmed:
			m.drift(Drift{OrderID: in.ID, Tier: Record, Op: "reclaim", SKUs: skus[in.ID], Err: errConfirmedCopy})
		}
		// Unknown: not recorded (yet); a racing Settle's recheck
		// reverts it. Reverted, refunded, expired: nothing to return.
	}
	return m.revertAll(ctx, ids, skus, "revert reclaimed")
}

// revertAll returns each order's copy at the record while it is held (see
// stock.HoldReverter); a copy confirmed since the caller read it is a sale, kept
// and reported to Config.OnDrift with its SKUs from skus (nil: unknown).
// The failures are one *TierError naming op.
func (m *Manager) revertAll(ctx context.Context, ids []string, skus map[string][]string, op string) error {
	var errs []error
	for _, id := range ids {
		found, err := m.record.RevertHeld(ctx, id)
		switch {
		case err != nil:
			errs = append(errs, err)
		case found == stock.StateConfirmed:
			m.drift(Drift{OrderID: id, Tier: Record, Op: "reclaim", SKUs: skus[id], Err: errConfirmedCopy})
		}
	}
	if len(errs) > 0 {
		return &TierError{Tier: Record, Op: op, Err: errors.Join(errs...)}
	}
	return nil
}
