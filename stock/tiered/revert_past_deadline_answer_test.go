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

// An order held past its deadline (not reclaimed yet) that a Revert ended
// expired, as memstock ends it: Confirm answers stock.ErrHoldExpired, and
// keeps that answer once the gate loses its data (the record's copy,
// still within its grace, was reverted). Through the flow and its
// Fallback.
func TestConfirmOfAnOrderRevertedPastItsDeadlineStaysFinalOnceTheGateForgot(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	listing := stock.Listing{SKU: "a", Units: 20, HoldTTL: time.Minute, MaxHoldTTL: 3 * time.Minute}
	o := stock.Order{ID: "o0", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 1}}}

	// the contract, on memstock
	ref := memstock.New(clock)
	if err := ref.PutOnSale(ctx, listing); err != nil {
		t.Fatal(err)
	}
	if err := ref.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	clock.Advance(70 * time.Second)
	if err := ref.Revert(ctx, "o0"); err != nil {
		t.Fatalf("memstock Revert: %v", err)
	}
	want := ref.Confirm(ctx, "o0")
	if !errors.Is(want, stock.ErrHoldExpired) {
		t.Fatalf("memstock Confirm: %v", want)
	}

	clock = stocktest.NewClock(stocktest.Epoch)
	gate := stocktest.NewFaulty(memstock.New(clock))
	record := memstock.New(clock)
	m := tiered.New(gate, record, tiered.Config{Clock: clock})
	if err := m.PutOnSale(ctx, listing); err != nil {
		t.Fatal(err)
	}
	if err := m.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	clock.Advance(70 * time.Second) // past the deadline, not reclaimed
	if err := m.Revert(ctx, "o0"); err != nil {
		t.Fatalf("Revert: %v", err)
	}
	if err := m.Confirm(ctx, "o0"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("Confirm with the gate intact: %v, want %v", err, stock.ErrHoldExpired)
	}
	g := memstock.New(clock)
	if err := g.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 20, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	gate.Manager = g // the gate lost its data
	if err := m.Confirm(ctx, "o0"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Errorf("Confirm once the gate forgot: %v, want %v (as answered before)", err, stock.ErrHoldExpired)
	}
	if err := m.Fallback().Confirm(ctx, "o0"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Errorf("Fallback.Confirm: %v, want %v (as answered before)", err, stock.ErrHoldExpired)
	}
}
