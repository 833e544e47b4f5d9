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

// a's breaker ramps (10%) on a healthy gate; b's, later in the order's
// SKU order, is open. Orders of a alone alternate with orders of a and b.
// An order b's breaker keeps off the primary takes no slot of a's ramping
// share (route's doc), so a's share goes to its own orders (package doc: a
// share of new orders goes to the primary at each ramp step) on a healthy
// primary while b stays open.
func TestRampShareIsNotTakenByOrdersAnOpenBreakerKeepsOff(t *testing.T) {
	f := rampFixture(t)
	f.tripAlone("a")
	f.clock.Advance(time.Second)
	f.tripAlone("b")
	f.gate.SetFault(stocktest.Healthy)
	f.clock.Advance(9 * time.Second) // a's OpenFor has passed, not b's
	if err := f.d.Deduct(t.Context(), stock.Order{ID: "start-a", Items: []stock.Item{{SKU: "a", Qty: 1}}}); !errors.Is(err, degrade.ErrBusy) {
		t.Fatalf("the order that starts a's recalibration: %v, want ErrBusy", err)
	}
	if s := f.waitNot("a", degrade.Recalibrating); s != degrade.Ramping {
		t.Fatalf("a's breaker after its recalibration: %v, want Ramping", s)
	}
	aloneTaken := 0
	for i := range 20 {
		alone := stock.Order{ID: fmt.Sprint("a-", i), Items: []stock.Item{{SKU: "a", Qty: 1}}}
		switch err := f.d.Deduct(t.Context(), alone); {
		case err == nil:
			aloneTaken++
		case !errors.Is(err, degrade.ErrBusy):
			t.Fatalf("order %s: %v", alone.ID, err)
		}
		both := stock.Order{ID: fmt.Sprint("ab-", i), Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}}
		if err := f.d.Deduct(t.Context(), both); !errors.Is(err, degrade.ErrBusy) {
			t.Fatalf("order %s while b's breaker is open: %v, want ErrBusy", both.ID, err)
		}
	}
	if s := f.d.State("b"); s != degrade.Degraded {
		t.Fatalf("b's breaker: %v, want Degraded (within its OpenFor)", s)
	}
	if aloneTaken != 2 {
		t.Errorf("20 orders of a alone during a's 10%% ramp step, healthy gate, b's breaker open: %d sent to the primary and taken, want 2 (a's share of the orders it could send)", aloneTaken)
	}
}
