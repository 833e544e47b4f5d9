package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A repeat Deduct answered stock.ErrHoldExpired for an order held past its
// deadline: the answer is final. Once the gate lost its data (before the
// reclaimer ran), a further repeat does not take the order again, and
// Confirm does not sell it.
func TestHoldExpiredAnswerOfARepeatDeductStaysFinalOnceTheGateForgot(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	gate := stocktest.NewFaulty(memstock.New(clock))
	record := memstock.New(clock)
	m := tiered.New(gate, record, tiered.Config{Clock: clock})
	if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 20, HoldTTL: time.Minute, MaxHoldTTL: 3 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	o := stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 2}}}
	if err := m.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	clock.Advance(70 * time.Second) // past the gate deadline, not reclaimed
	if err := m.Deduct(ctx, o); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("repeat Deduct past the deadline: %v, want %v", err, stock.ErrHoldExpired)
	}
	lv, err := record.Levels(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	g := memstock.New(clock)
	if err := g.PutOnSale(ctx, stock.Listing{SKU: "a", Units: lv.Available, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	gate.Manager = g // the gate lost its data, rebuilt from the record
	derr := m.Deduct(ctx, o)
	in, _ := m.Orders(ctx, []string{"o1"})
	cerr := m.Confirm(ctx, "o1")
	t.Logf("repeat Deduct once the gate forgot: %v; Orders %v; Confirm %v", derr, in[0].State, cerr)
	if derr == nil {
		t.Errorf("repeat Deduct once the gate forgot: nil after an earlier repeat answered %v", stock.ErrHoldExpired)
	}
	if cerr == nil {
		t.Errorf("Confirm sold an order a repeat Deduct had answered %v", stock.ErrHoldExpired)
	}
}
