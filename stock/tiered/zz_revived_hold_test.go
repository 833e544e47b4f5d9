package tiered_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// After the gate lost its data, a repeat Deduct of an order past its gate
// deadline (its record copy within the grace) places a new gate hold that
// outlives the record copy: Orders then says held with a deadline to come
// while Confirm refuses. Orders held (deadline ahead) means Confirm sells.
func TestZZOrdersHeldMeansConfirmSellsAfterARepeatOnAGateThatForgot(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	gate := stocktest.NewFaulty(memstock.New(clock))
	record := memstock.New(clock)
	m := tiered.New(gate, record, tiered.Config{Clock: clock})
	if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 20, HoldTTL: time.Minute, MaxHoldTTL: 3 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	o := stock.Order{ID: "o0", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	if err := m.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	clock.Advance(77 * time.Second)
	g := memstock.New(clock)
	if err := g.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 19, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	gate.Manager = g // the gate lost its data
	t.Logf("repeat Deduct once the gate forgot: %v", m.Deduct(ctx, o))
	clock.Advance(47 * time.Second)
	in, err := m.Orders(ctx, []string{"o0"})
	if err != nil {
		t.Fatal(err)
	}
	cerr := m.Confirm(ctx, "o0")
	if in[0].State == stock.StateHeld && in[0].Deadline.After(clock.Now()) && cerr != nil {
		t.Fatalf("Orders: held until %v (now %v), and Confirm: %v", in[0].Deadline, clock.Now(), cerr)
	}
}
