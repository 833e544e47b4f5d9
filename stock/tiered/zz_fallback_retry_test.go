package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A Deduct taken at the record alone (the breaker open: package degrade's
// fallback) whose reply was lost, retried through the flow once the gate
// is back, after the order's deadline (the gate deadline it has by the
// record, the listing's hold time): the contract answers a repeat past its
// deadline stock.ErrHoldExpired. The gate, which never had the order,
// takes it as new, and the record answers the repeat nil (its own deadline
// is a grace later). Then Orders says held with a deadline ahead (the new
// gate copy's) while Confirm answers stock.ErrHoldExpired: "Orders
// reports an order held with a deadline ahead only when a Confirm would
// sell it" does not hold.
func TestZZRetryOfAFallbackDeductPastItsDeadline(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	o := stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 2}}}
	f.record.SetFaultFor(stocktest.LostReply, stocktest.OnMethod("Deduct"))
	err := f.m.Fallback().Deduct(ctx, o)
	f.record.SetFault(stocktest.Healthy)
	if !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("fallback Deduct with its reply lost: %v", err)
	}
	f.clock.Advance(90 * time.Second) // past the order's deadline (1m), before the record's (2m)
	derr := f.m.Deduct(ctx, o)        // the retry, through the flow
	if !errors.Is(derr, stock.ErrHoldExpired) {
		t.Errorf("retry of the Deduct 30s past the order's deadline: %v, want ErrHoldExpired", derr)
	}
	f.clock.Advance(40 * time.Second)
	in, err := f.m.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	cerr := f.m.Confirm(ctx, "o1")
	if in[0].State == stock.StateHeld && in[0].Deadline.After(f.clock.Now()) && cerr != nil {
		t.Errorf("Orders: held until %v (now %v), but Confirm: %v", in[0].Deadline, f.clock.Now(), cerr)
	}
}
