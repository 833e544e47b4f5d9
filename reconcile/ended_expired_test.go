package reconcile_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// A pass changes no order's outcome, it only frees what the record
// already ended (stock.Manager Confirm: stock.ErrHoldExpired for a hold
// that expired, stock.ErrOrderClosed for an order reverted): a hold the
// gate extended while the record's extension failed, which the record's
// own reclaimer then expired, is answered the same with or without a pass
// in between. The pass ends it at the gate expired, so both tiers hold
// the order expired and the buyer's Confirm is stock.ErrHoldExpired.
func TestPassKeepsAnExpiredOrderExpired(t *testing.T) {
	w := newWorld(t, pairs()[0], reconcile.Config{})
	w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}), "PutOnSale")
	o := stock.Order{ID: "o1", UserID: "alice", Items: []stock.Item{{SKU: "phone", Qty: 3}}}
	w.must(w.flow.Deduct(w.ctx, o), "Deduct o1")
	w.must(w.gate.ExtendHold(w.ctx, "o1", w.clock.Now().Add(30*time.Minute)), "ExtendHold at the gate (the record's step failed)")
	w.clock.Advance(5 * time.Minute)
	_, err := w.record.ReclaimExpired(w.ctx, 10)
	w.must(err, "record ReclaimExpired")

	rep, err := w.rec.Repair(w.ctx, []string{"phone"})
	w.must(err, "Repair")
	t.Logf("%+v", rep)
	gi, err := w.gate.Orders(w.ctx, []string{"o1"})
	w.must(err, "gate Orders")
	ri, err := w.record.Orders(w.ctx, []string{"o1"})
	w.must(err, "record Orders")
	if gi[0].State != ri[0].State {
		t.Errorf("o1: gate %v, record %v after the pass: want one state", gi[0].State, ri[0].State)
	}
	if err := w.flow.Confirm(w.ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Errorf("Confirm o1 after the pass: %v, want stock.ErrHoldExpired (as without the pass)", err)
	}
}
