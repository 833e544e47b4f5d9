package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// stock.HoldExtender: ExtendHold "moves a held order's deadline ... out
// to deadline"; Orders says the order is held until then. An extension the
// flow answered nil (decided at the record while the gate answered
// stock.ErrUnavailable for one call: a failed read, not lost data) must be
// one Confirm honours before the new deadline, and one Orders reports. An
// extension not answered nil is an error to retry, whose retry with the
// gate healthy answers nil and is honoured so.
func TestExtensionAnsweredNilIsHonouredByConfirm(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	f.gate.SetFaultFor(stocktest.Unavailable, stocktest.OnMethod("ExtendHold"))
	err := f.m.ExtendHold(ctx, "o1", f.clock.Now().Add(5*time.Minute))
	f.gate.SetFault(stocktest.Healthy)
	if err != nil {
		// Not answered nil: an error the caller retries (stock.ErrUnavailable
		// or ErrUnknownOutcome), and the retry answers nil.
		if !errors.Is(err, stock.ErrUnknownOutcome) && !errors.Is(err, stock.ErrUnavailable) {
			t.Fatalf("ExtendHold with the gate unavailable: %v, want nil or an error to retry", err)
		}
		if err := f.m.ExtendHold(ctx, "o1", f.clock.Now().Add(5*time.Minute)); err != nil {
			t.Fatalf("ExtendHold again with the gate healthy: %v, want nil", err)
		}
	}
	f.clock.Advance(2 * time.Minute) // past the first deadline, well before the extended one
	in, err := f.m.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	if in[0].State != stock.StateHeld || !in[0].Deadline.After(f.clock.Now()) {
		t.Errorf("Orders after an extension answered nil: %s until %v (now %v), want held until the extended deadline", in[0].State, in[0].Deadline, f.clock.Now())
	}
	if err := f.m.Confirm(ctx, "o1"); err != nil {
		t.Errorf("Confirm before the deadline ExtendHold answered nil for: %v, want nil (a sale)", err)
	}
}
