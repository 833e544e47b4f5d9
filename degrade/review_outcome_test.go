package degrade_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// These tests fail on purpose: each shows an answer of the Manager that
// breaks a promise of its doc or of package stock. They are not fixed yet.

// A buyer paying for an order that was cancelled, while the gate refuses
// connections and the breaker is open, is told the outcome is unknown
// (retry) instead of stock.ErrOrderClosed, though nothing was written
// anywhere: the record path answers ErrOrderClosed, the Manager then asks
// the flow (to tell an expired hold from a cancel), the flow's Confirm
// finds the copy closed and asks the gate, whose refused dial (nothing
// sent) it wraps as a *TierError matching stock.ErrUnknownOutcome, and the
// Manager returns that because "the primary may have applied it". Every
// retry gets the same answer for as long as the gate is down.
//
// Broken promise: the outcome rule through the Manager (degrade doc: "a
// primary error that does not match stock.ErrUnknownOutcome (a refused
// dial ...) applied nothing and is returned as it is"; stock doc: "An
// error from before any request that could write was sent (... a refused
// dial) is returned as it is"), and "the record path decides while it
// does not [let calls through]".
func TestReviewConfirmOfACancelledOrderWhileTheGateIsDownIsFinal(t *testing.T) {
	f := newFlowFixture(t, degrade.Config{})
	ctx := t.Context()
	if err := f.d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
		t.Fatal(err)
	}
	if err := f.buy("o1"); err != nil {
		t.Fatal(err)
	}
	if err := f.d.Revert(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	f.tripGate()
	f.gate.SetFault(stocktest.Down) // refused: nothing reaches the gate
	err := f.d.Confirm(ctx, "o1")
	if errors.Is(err, stock.ErrUnknownOutcome) || !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("Confirm of the cancelled order with the gate refusing connections: %v; want stock.ErrOrderClosed, not an unknown outcome (nothing was written)", err)
	}
}

// New panics, instead of refusing the input, when the fallback given with
// a tiered flow is a nil *tiered.Fallback (a variable never assigned):
// the check that it is the flow's record path calls its Flow method,
// which dereferences the nil pointer.
//
// Broken promise: New's doc (a fallback that is not the flow's record
// path "is refused with an error wrapping stock.ErrInvalid") and the
// project's rule that bad input gets a clear error, never a panic.
func TestReviewNewRefusesANilRecordPath(t *testing.T) {
	clock := stocktest.NewClock(stocktest.Epoch)
	flow := tiered.New(memstock.New(clock), memstock.New(clock), tiered.Config{Clock: clock})
	var fb *tiered.Fallback
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		d, err := degrade.New(flow, fb, degrade.Config{Clock: clock})
		if d != nil {
			d.Close()
		}
		return err
	}()
	if !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("New with a nil *tiered.Fallback: %v, want an error wrapping stock.ErrInvalid", err)
	}
}
