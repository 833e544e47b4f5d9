package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// o1 (3 units of a) is extended to an hour at the gate; the record's
// extension fails. At the record's own deadline the record's reclaimer
// expires its copy; the gate still holds o1 to the extended deadline. The
// buyer cancels: Revert answers nil (the record returned the order) and
// returns the gate's hold too, so the units and the buyer's quota are
// free at once. A Revert that skipped the gate for every order the record
// had returned left the hold to its deadline.
func TestRevertOfAnOrderTheRecordExpiredReturnsTheGateHold(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 3, HoldTTL: 10 * time.Minute, MaxHoldTTL: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	f.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("ExtendHold"))
	err := f.m.ExtendHold(ctx, "o1", stocktest.Epoch.Add(time.Hour))
	f.record.SetFault(stocktest.Healthy)
	if err == nil {
		t.Fatal("ExtendHold with the record down: nil")
	}
	f.clock.Advance(25 * time.Minute) // past the record's deadline (10m + 10m grace), before the gate's (60m)
	if _, err := f.m.ReclaimExpired(ctx, 100); err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	if s := f.recordState("o1"); s != stock.StateExpired {
		t.Fatalf("record's copy: %v, want expired", s)
	}
	if err := f.m.Revert(ctx, "o1"); err != nil {
		t.Fatalf("Revert: %v", err)
	}
	in, err := f.gate.Manager.(stock.OrderReader).Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	lv, err := f.gate.Manager.Levels(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	lerr := f.m.Deduct(ctx, ord("o2", 3)) // the buyer orders again
	if in[0].State == stock.StateHeld {
		t.Fatalf("Revert told nil, and the gate still holds o1 (state %v, deadline %v; gate available/held %d/%d); the buyer's new order of 3: %v (limit reached: %v)",
			in[0].State, in[0].Deadline.Sub(stocktest.Epoch), lv.Available, lv.Held, lerr, errors.Is(lerr, stock.ErrLimitReached))
	}
}

// o1 is cancelled at the record alone while the gate was set aside (the
// Fallback a breaker sends calls to), and its gate hold left to its
// deadline. The cancel repeated through the flow once the gate is back
// returns that hold: a later ExtendHold of the cancelled order finds it
// closed at both tiers.
func TestRevertAfterACancelAtTheRecordAloneClosesTheGateHold(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: 10 * time.Minute, MaxHoldTTL: 3 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Fallback().Revert(ctx, "o1"); err != nil { // the cancel, while the gate was set aside
		t.Fatal(err)
	}
	if err := f.m.Revert(ctx, "o1"); err != nil { // the cancel, repeated through the flow
		t.Fatalf("Revert: %v", err)
	}
	xerr := f.m.ExtendHold(ctx, "o1", stocktest.Epoch.Add(2*time.Hour))
	in, err := f.gate.Manager.(stock.OrderReader).Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	if in[0].State == stock.StateHeld {
		t.Fatalf("after a Revert told nil, the gate holds o1 (deadline +%v); ExtendHold answered %v", in[0].Deadline.Sub(stocktest.Epoch), xerr)
	}
}
