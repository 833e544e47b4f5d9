package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Orders and Confirm agree: an order Orders reports held with a deadline
// still ahead is one a Confirm sells. An extension the gate applied and
// the record did not (its record step failed; nobody retried) leaves the
// record's copy to its own deadline; the record's sweep ends it there
// while the gate still holds it. Orders then reports the gate's hold
// (held, deadline ahead), and Confirm answers stock.ErrHoldExpired.
func TestOrdersHeldMeansConfirmable(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	f.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("ExtendHold"))
	if err := f.m.ExtendHold(ctx, "o1", f.clock.Now().Add(4*time.Minute)); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("ExtendHold with the record down: %v, want a *TierError", err)
	}
	f.record.SetFault(stocktest.Healthy)
	f.clock.Advance(3*time.Minute + 30*time.Second) // past the record's deadline, before the gate's
	if _, err := f.m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	in, err := f.m.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	rin, _ := f.record.Manager.(stock.OrderReader).Orders(ctx, []string{"o1"})
	t.Logf("Orders: %s until %v (now %v); record: %s", in[0].State, in[0].Deadline, f.clock.Now(), rin[0].State)
	held := in[0].State == stock.StateHeld && in[0].Deadline.After(f.clock.Now())
	cerr := f.m.Confirm(ctx, "o1")
	if held && cerr != nil {
		t.Errorf("Orders says o1 held until %v (now %v), Confirm answers %v", in[0].Deadline, f.clock.Now(), cerr)
	}
	if !held && cerr == nil {
		t.Errorf("Orders says %s, Confirm sold it", in[0].State)
	}
}

// The same with no fault: with a Recorder, a hold extended while its
// hand-off is pending reaches the record with the record's own hold time
// from the Settle (the caller did not extend it again after Settle). The
// record's sweep ends the copy while the gate holds it; Orders reports
// the gate's hold, deadline ahead, and Confirm answers expired.
func TestOrdersHeldMeansConfirmableAfterAnExtensionWhilePending(t *testing.T) {
	f := newFixture(t, true)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	if err := f.m.ExtendHold(ctx, "o1", f.clock.Now().Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, o := range f.queue {
		if err := f.m.Settle(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(3*time.Minute + 30*time.Second)
	if _, err := f.m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	in, err := f.m.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	held := in[0].State == stock.StateHeld && in[0].Deadline.After(f.clock.Now())
	cerr := f.m.Confirm(ctx, "o1")
	if held && cerr != nil {
		t.Errorf("Orders says o1 held until %v (now %v), Confirm answers %v", in[0].Deadline, f.clock.Now(), cerr)
	}
}
