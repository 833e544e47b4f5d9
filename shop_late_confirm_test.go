package stockguard_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
)

// A paid order is refunded at the record alone (the flow's fallback, as
// package degrade does while the breaker is open), and the Shop's
// reconciliation counts the refunded units back into the gate. A late
// retry of the order's Confirm then finds the record's copy closed: it is
// answered, and nothing is returned a second time. The gate never offers
// more than the record has.
func TestShopLateConfirmAfterARefundAtTheRecordAloneRefundsNothing(t *testing.T) {
	shop, _, _ := shopOn(t, stockguard.Config{})
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 15 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := shop.Deduct(ctx, order("o1", 3)); err != nil {
		t.Fatal(err)
	}
	if err := shop.Confirm(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	// The refund, while the breaker kept traffic off the gate.
	if err := shop.Flow().Fallback().Revert(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	// Run's pass for the SKU the refund reported.
	if _, err := shop.Reconciler().RepairAll(ctx); err != nil {
		t.Fatal(err)
	}
	g, r := levels(t, shop.Gate()), levels(t, shop.Record())
	if g.Available != 10 || r.Available != 10 {
		t.Fatalf("after the refund and a pass: gate %d, record %d available, want 10 and 10", g.Available, r.Available)
	}
	// A retry of the earlier Confirm (its reply was late).
	err := shop.Confirm(ctx, "o1")
	g, r = levels(t, shop.Gate()), levels(t, shop.Record())
	if g.Available > r.Available {
		t.Fatalf("late Confirm answered %v and left the gate at %d available above the record's %d: the refund was paid out twice at the gate", err, g.Available, r.Available)
	}
	if !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("late Confirm of a refunded order: %v, want ErrOrderClosed", err)
	}
}
