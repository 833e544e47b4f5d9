package degrade_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
)

// a's breaker ramps (10%) on a healthy gate; b's, later in the order's
// SKU order, is open. Orders of a alone alternate with orders of a and b.
// An order b's breaker keeps off the primary takes no slot of a's ramping
// share (route's doc), so a's share goes to its own orders (package doc: a
// share of new orders goes to the primary at each ramp step) on a healthy
// primary while b stays open.
func TestRampShareIsNotTakenByOrdersAnOpenBreakerKeepsOff(t *testing.T) {
	f := rampFixture(t)
	f.rampBesideOpen("a", "b")
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
