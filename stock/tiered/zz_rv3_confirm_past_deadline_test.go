package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// confirmPastRecord / Confirm's doc: a Confirm refused because the hold's
// time ran out answers stock.ErrHoldExpired, "as every later look at the
// order says (Orders, a repeat Deduct, Confirm again)"; no caller
// reverted the order, so stock.ErrOrderClosed is never its answer. Here
// the deadline passes while Confirm is between the tiers (the gate
// confirmed, the record's copy ran out before it was asked).
func TestConfirmExpiredBetweenTheTiersStaysExpired(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	fired := false
	f.record.SetBefore(func(c stocktest.Call) {
		if c.Method == "Confirm" && c.OrderID == "o1" && !fired {
			fired = true
			f.clock.Advance(10 * time.Minute) // past the record copy's deadline
		}
	})
	first := f.m.Confirm(ctx, "o1")
	f.record.SetBefore(nil)
	if !fired {
		t.Fatal("the record was never asked to confirm")
	}
	if !errors.Is(first, stock.ErrHoldExpired) {
		t.Fatalf("Confirm whose hold ran out between the tiers: %v, want %v", first, stock.ErrHoldExpired)
	}
	if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Errorf("Confirm again: %v, want %v (the first answer)", err, stock.ErrHoldExpired)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrHoldExpired) {
		t.Errorf("repeat Deduct: %v, want %v", err, stock.ErrHoldExpired)
	}
	in, err := f.m.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	if in[0].State != stock.StateExpired {
		t.Errorf("Orders: %s, want expired", in[0].State)
	}
}

// The cause of the flaky stocktest MixedTrafficKeepsTheBooks run
// ("Confirm: stock: order already reverted" for an order no caller
// reverted): a buyer's Confirm confirmed at the gate; before it reaches
// the record, the hold's time runs out and a reclaim pass (another node's
// ReclaimExpired, its follow-up finishing the Confirm) finds the record's
// copy ended and refunds the gate's sale. The buyer's Confirm then reads
// the gate refunded and answers stock.ErrOrderClosed, as if a Revert had
// closed the order. stock.Manager's contract: Confirm after the deadline
// is stock.ErrHoldExpired; ErrOrderClosed only for an order a Revert
// closed.
func TestConfirmRacingAReclaimPassIsNeverClosed(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	fired := false
	var reclaimErr error
	f.record.SetBefore(func(c stocktest.Call) {
		if c.Method == "Confirm" && c.OrderID == "o1" && !fired {
			fired = true
			f.clock.Advance(10 * time.Minute)
			_, reclaimErr = f.m.ReclaimExpired(ctx, 10)
		}
	})
	first := f.m.Confirm(ctx, "o1")
	f.record.SetBefore(nil)
	if !fired {
		t.Fatal("the record was never asked to confirm")
	}
	if reclaimErr != nil {
		t.Logf("reclaim pass: %v", reclaimErr)
	}
	g, _ := f.gate.Orders(ctx, []string{"o1"})
	r, _ := f.record.Orders(ctx, []string{"o1"})
	if first != nil && !errors.Is(first, stock.ErrHoldExpired) {
		t.Errorf("Confirm racing a reclaim pass past the deadline: %v, want nil or %v (gate %s, record %s)", first, stock.ErrHoldExpired, g[0].State, r[0].State)
	}
	again := f.m.Confirm(ctx, "o1")
	if !errors.Is(again, first) && !(first == nil && again == nil) {
		t.Errorf("Confirm again: %v, want the first answer %v", again, first)
	}
}
