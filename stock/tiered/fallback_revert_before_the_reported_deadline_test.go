package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Fallback.Revert "cancels a held order at the record (past the order's
// gate deadline it ends expired, see Manager.Revert)"; Orders gives the
// order's deadline ("the earlier of the gate's and the record copy's
// own"). An order Orders reports held with its deadline ahead, reverted
// by the fallback then (the gate down for that call), was closed by its
// caller: Confirm answers stock.ErrOrderClosed and Orders says reverted,
// not expired. Here the gate extended the hold and the record did not
// take the extension (ExtendHold answered an error to retry).
func TestFallbackRevertBeforeTheReportedDeadlineIsClosed(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	f.record.SetFaultFor(stocktest.Unavailable, stocktest.OnMethod("ExtendHold"))
	err := f.m.ExtendHold(ctx, "o1", f.clock.Now().Add(5*time.Minute))
	f.record.SetFault(stocktest.Healthy)
	t.Logf("ExtendHold with the record unavailable: %v", err)
	g, _ := f.gate.Orders(ctx, []string{"o1"})
	r, _ := f.record.Orders(ctx, []string{"o1"})
	t.Logf("gate deadline %v, record deadline %v", g[0].Deadline, r[0].Deadline)
	// Step to just before the deadline Orders reports.
	in, err := f.m.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	at := in[0].Deadline.Add(-time.Second)
	if !at.After(f.clock.Now()) {
		t.Fatalf("Orders deadline %v not ahead", in[0].Deadline)
	}
	f.clock.Advance(at.Sub(f.clock.Now()))
	in, _ = f.m.Orders(ctx, []string{"o1"})
	if in[0].State != stock.StateHeld || !in[0].Deadline.After(f.clock.Now()) {
		t.Fatalf("Orders before the fallback's Revert: %s until %v (now %v), want held ahead", in[0].State, in[0].Deadline, f.clock.Now())
	}
	if err := f.m.Fallback().Revert(ctx, "o1"); err != nil {
		t.Fatalf("Fallback.Revert: %v", err)
	}
	in, _ = f.m.Orders(ctx, []string{"o1"})
	if in[0].State != stock.StateReverted {
		t.Errorf("Orders after a Revert before the reported deadline: %s, want reverted", in[0].State)
	}
	if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrOrderClosed) {
		t.Errorf("Confirm after a Revert before the reported deadline: %v, want %v", err, stock.ErrOrderClosed)
	}
}
