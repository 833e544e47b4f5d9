package tiered_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// stateOf is the order's state as m reports it.
func stateOf(t *testing.T, m stock.OrderReader, id string) stock.State {
	t.Helper()
	in, err := m.Orders(t.Context(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	return in[0].State
}

// saleAtTheRecordAlone takes order o1 (2 units of a, user u1) through
// f's flow, confirms it at the record alone (a fallback's Confirm while
// the gate was set aside, before the gate deadline), and moves the clock
// past the gate's deadline, before the record's: the gate still holds
// the order, and no reclaim pass has run. It returns the order.
func saleAtTheRecordAlone(t *testing.T, f *fixture) stock.Order {
	t.Helper()
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	o := stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 2}}}
	if err := f.m.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Fallback().Confirm(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(90 * time.Second)
	return o
}

// A sale confirmed at the record alone whose gate hold is past its
// deadline and not reclaimed yet: a repeated Deduct of a confirmed order
// returns nil by the contract, as on every backend, and Orders says
// confirmed before and after.
func TestRepeatDeductOfASaleTheGateHoldsPastItsDeadline(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	o := saleAtTheRecordAlone(t, f)
	if st := stateOf(t, f.m, "o1"); st != stock.StateConfirmed {
		t.Fatalf("Orders: %v, want confirmed", st)
	}
	if err := f.m.Deduct(ctx, o); err != nil {
		t.Errorf("repeat Deduct of the confirmed order: %v, want nil", err)
	}
	if st := stateOf(t, f.m, "o1"); st != stock.StateConfirmed {
		t.Errorf("Orders after the repeat: %v, want confirmed", st)
	}
}
