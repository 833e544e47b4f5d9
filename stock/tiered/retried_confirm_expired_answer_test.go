package tiered_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A Confirm that confirmed at the gate and stopped before the record
// (a *TierError: "the retry finishes the job and gives the final answer")
// is retried once the record copy's own deadline has passed. The record
// refuses, so the retry answers stock.ErrHoldExpired; CHANGELOG: "every
// later answer says the hold expired" (Confirm, a repeat Deduct, Orders).
// The gate's sale is left as it is and its SKU reported to
// Config.OnDrift, as Revert leaves one (returnGate): reconciliation counts
// the units the record got back into the gate, and a refund there would
// pay them out twice.
func TestRetriedConfirmExpiredAnswerStaysFinal(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	f.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Confirm"))
	if err := f.m.Confirm(ctx, "o1"); err == nil {
		t.Fatal("Confirm with the record down: nil, want a *TierError")
	}
	f.record.SetFault(stocktest.Healthy)
	f.clock.Advance(2*time.Minute + time.Second) // past the record copy's own deadline, no reclaimer run yet
	if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("retried Confirm past the record copy's deadline: %v, want %v", err, stock.ErrHoldExpired)
	}
	wantExpired(t, f.m, "after the retried Confirm")
	f.want(f.gate, "gate", "a", 7, 0, 3)
	reported := false
	for _, d := range f.drift {
		if d.OrderID == "o1" && d.Tier == tiered.Gate && slices.Contains(d.SKUs, "a") {
			reported = true
		}
	}
	if !reported {
		t.Errorf("the gate's sale of o1 was not reported to OnDrift with its SKU: %+v", f.drift)
	}
	f.want(f.record, "record", "a", 10, 0, 0)
}
