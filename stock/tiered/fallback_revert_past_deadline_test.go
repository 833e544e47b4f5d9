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

// An order the fallback reverted (Revert answered nil) while the gate
// still held it past its deadline: Confirm answers stock.ErrOrderClosed,
// as Orders reads it and as every backend answers a reverted order.
func TestConfirmOfAnOrderTheFallbackRevertedPastTheGateDeadline(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	gate, record := memstock.New(clock), memstock.New(clock)
	m := tiered.New(gate, record, tiered.Config{Clock: clock})
	fb := tiered.New(gate, record, tiered.Config{Clock: clock}).Fallback()
	if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 20, HoldTTL: time.Minute, MaxHoldTTL: 3 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	o := stock.Order{ID: "o0", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	if err := m.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	clock.Advance(27 * time.Second)
	if err := m.ExtendHold(ctx, "o0", stocktest.Epoch.Add(142*time.Second)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(142*time.Second - 27*time.Second) // at the deadline, not reclaimed
	t.Logf("repeat Deduct: %v", m.Deduct(ctx, o))
	clock.Advance(6 * time.Second)
	if err := fb.Revert(ctx, "o0"); err != nil {
		t.Fatalf("fallback Revert: %v", err)
	}
	clock.Advance(35 * time.Second)
	in, err := m.Orders(ctx, []string{"o0"})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Confirm(ctx, "o0")
	t.Logf("Orders: %v (deadline %v, now %v); Confirm: %v", in[0].State, in[0].Deadline, clock.Now(), err)
	if in[0].State == stock.StateReverted && !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("Confirm of an order Orders reads as reverted: %v, want %v", err, stock.ErrOrderClosed)
	}
}
