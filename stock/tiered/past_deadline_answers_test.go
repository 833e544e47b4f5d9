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

// pastDeadlineListing is the listing of the tests below: holds of a
// minute, extensible to three.
var pastDeadlineListing = stock.Listing{SKU: "a", Units: 20, HoldTTL: time.Minute, MaxHoldTTL: 3 * time.Minute}

// pastDeadlineFlow returns a flow over memstock tiers on a test clock, its
// gate behind a stocktest.Faulty (set its Manager to make the gate lose
// its data), its record, and the clock, with pastDeadlineListing on sale.
func pastDeadlineFlow(t *testing.T) (*tiered.Manager, *stocktest.Faulty, *memstock.Store, *stocktest.Clock) {
	t.Helper()
	clock := stocktest.NewClock(stocktest.Epoch)
	gate, record := stocktest.NewFaulty(memstock.New(clock)), memstock.New(clock)
	m := tiered.New(gate, record, tiered.Config{Clock: clock})
	if err := m.PutOnSale(t.Context(), pastDeadlineListing); err != nil {
		t.Fatal(err)
	}
	return m, gate, record, clock
}

// An order held past its deadline (not reclaimed yet) that a Revert ended
// expired, as memstock ends it: Confirm answers stock.ErrHoldExpired, and
// keeps that answer once the gate loses its data (the record's copy,
// still within its grace, was reverted). Through the flow and its
// Fallback.
func TestConfirmOfAnOrderRevertedPastItsDeadlineStaysFinalOnceTheGateForgot(t *testing.T) {
	ctx := t.Context()
	refClock := stocktest.NewClock(stocktest.Epoch)
	o := stock.Order{ID: "o0", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 1}}}

	// the contract, on memstock
	ref := memstock.New(refClock)
	if err := ref.PutOnSale(ctx, pastDeadlineListing); err != nil {
		t.Fatal(err)
	}
	if err := ref.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	refClock.Advance(70 * time.Second)
	if err := ref.Revert(ctx, "o0"); err != nil {
		t.Fatalf("memstock Revert: %v", err)
	}
	want := ref.Confirm(ctx, "o0")
	if !errors.Is(want, stock.ErrHoldExpired) {
		t.Fatalf("memstock Confirm: %v", want)
	}

	m, gate, _, clock := pastDeadlineFlow(t)
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

// A repeat Deduct answered stock.ErrHoldExpired for an order held past its
// deadline: the answer is final. Once the gate lost its data (before the
// reclaimer ran), a further repeat does not take the order again, and
// Confirm does not sell it.
func TestHoldExpiredAnswerOfARepeatDeductStaysFinalOnceTheGateForgot(t *testing.T) {
	ctx := t.Context()
	m, gate, record, clock := pastDeadlineFlow(t)
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

// An order the fallback reverted (Revert answered nil) while the gate
// still held it past its deadline: Confirm answers stock.ErrOrderClosed,
// as Orders reads it and as every backend answers a reverted order.
func TestConfirmOfAnOrderTheFallbackRevertedPastTheGateDeadline(t *testing.T) {
	ctx := t.Context()
	m, gate, record, clock := pastDeadlineFlow(t)
	fb := tiered.New(gate, record, tiered.Config{Clock: clock}).Fallback()
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
