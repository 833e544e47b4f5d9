package degrade_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// mixedFixture is the flow fixture with one breaker per SKU and two SKUs,
// a and b, on sale with 10 units each.
func mixedFixture(t *testing.T) *flowFixture {
	f := newFlowFixture(t, degrade.Config{PerSKU: 8})
	for _, sku := range []string{"a", "b"} {
		if err := f.d.PutOnSale(t.Context(), stock.Listing{SKU: sku, Units: 10}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

var mixed = stock.Order{ID: "ab", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}}

// tripA fails orders of a alone with the gate refusing connections until
// a's breaker opens, and returns how many it took.
func (f *flowFixture) tripA() int {
	f.t.Helper()
	f.gate.SetFault(stocktest.Down)
	n := 0
	for ; f.d.State("a") == degrade.Primary; n++ {
		if n > 10 {
			f.t.Fatal("a's breaker never opened")
		}
		err := f.d.Deduct(f.t.Context(), stock.Order{ID: fmt.Sprint("a-alone-", n), Items: []stock.Item{{SKU: "a", Qty: 1}}})
		if !errors.Is(err, stocktest.ErrInjected) {
			f.t.Fatalf("order of a alone with the gate down: %v", err)
		}
	}
	return n
}

// wantLevels fails the test unless m has exactly held units held and
// avail available of sku.
func (f *flowFixture) wantLevels(name string, m stock.Manager, sku string, avail, held int64) {
	f.t.Helper()
	lv, err := m.Levels(f.t.Context(), sku)
	if err != nil {
		f.t.Fatal(err)
	}
	if lv.Available != avail || lv.Held != held || lv.Sold != 0 {
		f.t.Fatalf("%s %s: available %d, held %d, sold %d; want %d, %d, 0", name, sku, lv.Available, lv.Held, lv.Sold, avail, held)
	}
}

// With the gate down, a's breaker opened on orders of a alone while b's
// is closed: b is only ever sold with a. The order of both goes nowhere
// while the breakers disagree (the gate of a takes no traffic; a write at
// the record alone of b, whose gate takes traffic, would break the gate
// bound), so each attempt counts as a failure of the primary for b, and
// the order is taken at the record once b's breaker has counted its
// threshold (5 consecutive failures): on the fifth attempt, never later.
func TestMixedOrderReachesTheRecordWhenOneBreakerIsOpen(t *testing.T) {
	f := mixedFixture(t)
	if n := f.tripA(); n != 5 {
		t.Fatalf("a's breaker opened after %d failures, want 5", n)
	}
	if s := f.d.State("b"); s != degrade.Primary {
		t.Fatalf("b's breaker is %v, want Primary", s)
	}
	const bound = 50
	taken := 0
	for i := 1; i <= bound && taken == 0; i++ {
		switch err := f.d.Deduct(t.Context(), mixed); {
		case err == nil:
			taken = i
		case errors.Is(err, degrade.ErrBusy):
			// nothing written: retry
			f.wantLevels("record", f.record, "a", 10, 0)
			f.wantLevels("record", f.record, "b", 10, 0)
		default:
			t.Fatalf("attempt %d of the mixed order: %v", i, err)
		}
	}
	if taken != 5 {
		t.Fatalf("mixed order taken at attempt %d (0: still ErrBusy after %d attempts, a %v, b %v); want at attempt 5, once b's breaker counted 5 failures",
			taken, bound, f.d.State("a"), f.d.State("b"))
	}
	if s := f.d.State("b"); s != degrade.Degraded {
		t.Fatalf("b's breaker is %v, want Degraded", s)
	}
	// A retry takes nothing more.
	if err := f.d.Deduct(t.Context(), mixed); err != nil {
		t.Fatalf("retry of the taken order: %v", err)
	}
	f.wantLevels("record", f.record, "a", 9, 1)
	f.wantLevels("record", f.record, "b", 9, 1)
	f.wantLevels("gate", f.gate.Manager, "a", 10, 0)
	f.wantLevels("gate", f.gate.Manager, "b", 10, 0)
}

// The same with an order in doubt: its first attempt reached the gate,
// which took it, and the reply was lost (one failure for both breakers).
// a's breaker opens on orders of a alone; each retry of the order in doubt
// is re-placed at the gate (still refusing: ErrUnknownOutcome) and counts
// as a failure for b, until b's breaker opens too and the record settles
// the order: on the fourth retry (b's failures 2 to 5). The record takes it
// once; the gate keeps the hold the lost reply took.
func TestMixedOrderInDoubtSettlesAtTheRecordWhenOneBreakerIsOpen(t *testing.T) {
	f := mixedFixture(t)
	f.gate.SetFault(stocktest.LostReply)
	if err := f.d.Deduct(t.Context(), mixed); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("first attempt with its reply lost: %v, want ErrUnknownOutcome", err)
	}
	if n := f.tripA(); n != 4 {
		t.Fatalf("a's breaker opened after %d more failures, want 4", n)
	}
	if s := f.d.State("b"); s != degrade.Primary {
		t.Fatalf("b's breaker is %v, want Primary", s)
	}
	const bound = 50
	settled := 0
	for i := 1; i <= bound && settled == 0; i++ {
		switch err := f.d.Deduct(t.Context(), mixed); {
		case err == nil:
			settled = i
		case errors.Is(err, stock.ErrUnknownOutcome):
			f.wantLevels("record", f.record, "a", 10, 0)
			f.wantLevels("record", f.record, "b", 10, 0)
		default:
			t.Fatalf("retry %d of the order in doubt: %v", i, err)
		}
	}
	if settled != 4 {
		t.Fatalf("order in doubt settled at retry %d (0: still ErrUnknownOutcome after %d retries, a %v, b %v); want at retry 4, once b's breaker counted 5 failures",
			settled, bound, f.d.State("a"), f.d.State("b"))
	}
	if err := f.d.Deduct(t.Context(), mixed); err != nil {
		t.Fatalf("retry of the settled order: %v", err)
	}
	f.wantLevels("record", f.record, "a", 9, 1)
	f.wantLevels("record", f.record, "b", 9, 1)
	f.wantLevels("gate", f.gate.Manager, "a", 9, 1)
	f.wantLevels("gate", f.gate.Manager, "b", 9, 1)
}
