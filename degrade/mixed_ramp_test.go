package degrade_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// rampFixture is the flow fixture with one breaker per SKU, a and b on
// sale with many units.
func rampFixture(t *testing.T) *flowFixture {
	f := newFlowFixture(t, degrade.Config{PerSKU: 8})
	for _, sku := range []string{"a", "b"} {
		if err := f.d.PutOnSale(t.Context(), stock.Listing{SKU: sku, Units: 100000}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// tripAlone opens sku's breaker with orders of sku alone, the gate down.
func (f *flowFixture) tripAlone(sku string) {
	f.t.Helper()
	f.gate.SetFault(stocktest.Down)
	for n := 0; f.d.State(sku) == degrade.Primary; n++ {
		if n > 10 {
			f.t.Fatalf("%s's breaker never opened", sku)
		}
		_ = f.d.Deduct(f.t.Context(), stock.Order{ID: fmt.Sprint(sku, "-trip-", n), Items: []stock.Item{{SKU: sku, Qty: 1}}})
	}
}

// waitNot waits (real time, the recalibration runs on a goroutine) until
// sku's breaker is no longer in state s.
func (f *flowFixture) waitNot(sku string, s degrade.State) degrade.State {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := f.d.State(sku)
		if got != s {
			return got
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s's breaker stays %v", sku, s)
		}
		time.Sleep(time.Millisecond)
	}
}

// mixedOrders sends n orders of a and b and returns how many were taken
// and how many got ErrBusy.
// rampBesideOpen opens ramping's breaker, then open's a second later, on
// orders of each alone with the gate down; heals the gate; and lets
// ramping's breaker, whose open period has passed (not open's), recalibrate
// and ramp.
func (f *flowFixture) rampBesideOpen(ramping, open string) {
	f.t.Helper()
	f.tripAlone(ramping)
	f.clock.Advance(time.Second)
	f.tripAlone(open)
	f.gate.SetFault(stocktest.Healthy)
	f.clock.Advance(9 * time.Second)
	start := stock.Order{ID: "start-" + ramping, Items: []stock.Item{{SKU: ramping, Qty: 1}}}
	if err := f.d.Deduct(f.t.Context(), start); !errors.Is(err, degrade.ErrBusy) {
		f.t.Fatalf("the order that starts %s's recalibration: %v, want ErrBusy", ramping, err)
	}
	if s := f.waitNot(ramping, degrade.Recalibrating); s != degrade.Ramping {
		f.t.Fatalf("%s's breaker after its recalibration: %v, want Ramping", ramping, s)
	}
}

func (f *flowFixture) mixedOrders(prefix string, n int) (taken, busy int) {
	f.t.Helper()
	for i := range n {
		o := stock.Order{ID: fmt.Sprint(prefix, i), Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}}
		switch err := f.d.Deduct(f.t.Context(), o); {
		case err == nil:
			taken++
		case errors.Is(err, degrade.ErrBusy):
			busy++
		default:
			f.t.Fatalf("order %s: %v", o.ID, err)
		}
	}
	return taken, busy
}

// Both breakers of a and b opened together and ramp back together, the
// gate healthy. One order of a alone during the ramp puts a's share count
// one ahead of b's: from then on, every order of a and b is in the
// primary's share of one breaker and outside the other's, so none is ever
// sent, no ramp step records a success, and every order of a and b gets
// ErrBusy for as long as the shop runs. Documented: a share of new orders
// goes to the primary at each ramp step, and traffic returns in steps.
func TestMixedOrdersAreSentWhileBothBreakersRamp(t *testing.T) {
	f := rampFixture(t)
	f.tripAlone("a")
	f.tripAlone("b")
	f.gate.SetFault(stocktest.Healthy)
	f.clock.Advance(10 * time.Second) // OpenFor
	for _, sku := range []string{"a", "b"} {
		o := stock.Order{ID: "start-" + sku, Items: []stock.Item{{SKU: sku, Qty: 1}}}
		if err := f.d.Deduct(t.Context(), o); !errors.Is(err, degrade.ErrBusy) {
			t.Fatalf("the order that starts %s's recalibration: %v, want ErrBusy", sku, err)
		}
	}
	for _, sku := range []string{"a", "b"} {
		if s := f.waitNot(sku, degrade.Recalibrating); s != degrade.Ramping {
			t.Fatalf("%s's breaker after its recalibration: %v, want Ramping", sku, s)
		}
	}
	// One order of a alone, outside a's 10% share.
	if err := f.d.Deduct(t.Context(), stock.Order{ID: "a-alone", Items: []stock.Item{{SKU: "a", Qty: 1}}}); !errors.Is(err, degrade.ErrBusy) {
		t.Fatalf("order of a alone at the start of the ramp: %v, want ErrBusy", err)
	}
	total := 0
	for round := range 60 {
		taken, _ := f.mixedOrders(fmt.Sprint("r", round, "-"), 20)
		total += taken
		f.clock.Advance(time.Second)
	}
	sa, sb := f.d.State("a"), f.d.State("b")
	if total == 0 || sa != degrade.Primary || sb != degrade.Primary {
		t.Fatalf("healthy gate, 1200 orders of a and b over 60s of ramp (steps 10%%, 50%%, 10s each): %d taken, breakers a %v, b %v; want orders taken and both back at the primary", total, sa, sb)
	}
}

// a's breaker opened on orders of a alone at t0, b's on orders of b alone
// one second later. The gate answers again. a recalibrates first and
// ramps (10%); the tenth order of a and b, the first in a's share, is held
// off by b's breaker, still open, and counts as a failure for a: a ramping
// breaker trips on one, so a is open again on a healthy gate, by one
// order. The doc says a SKU whose orders the primary answers "is not moved
// by a few such orders". Then b ramps while a is open and trips the same
// way, and so on: with orders of a and b only, the breakers take turns
// reopening each other and traffic never returns to the healthy primary.
func TestMixedBreakersDoNotReopenEachOtherOnAHealthyGate(t *testing.T) {
	f := rampFixture(t)
	f.rampBesideOpen("a", "b")
	taken, busy := f.mixedOrders("m-", 10)
	if s := f.d.State("a"); s != degrade.Ramping || taken != 0 || busy != 10 {
		t.Errorf("10 orders of a and b while b's breaker is open, the gate healthy: %d taken (at the record alone), %d busy, a's ramping breaker now %v; want 0, 10 and Ramping", taken, busy, s)
	}
	// Liveness: orders of a and b for two more minutes, the gate healthy.
	for round := range 120 {
		f.clock.Advance(time.Second)
		f.mixedOrders(fmt.Sprint("r", round, "-"), 20)
		for _, sku := range []string{"a", "b"} {
			if f.d.State(sku) == degrade.Recalibrating {
				f.waitNot(sku, degrade.Recalibrating)
			}
		}
	}
	if sa, sb := f.d.State("a"), f.d.State("b"); sa != degrade.Primary || sb != degrade.Primary {
		t.Errorf("healthy gate, 120s more of orders of a and b: breakers a %v, b %v; want both back at the primary", sa, sb)
	}
}
