package degrade_test

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
)

// b's breaker is open, c's ramps (b comes first in the order's SKU order).
// An order of b and c can go to neither tier (ErrBusy) and spends none of
// the fallback's budget (Config.FallbackLimit, FallbackBurst): the next
// order of b alone, which the fallback can take, takes its only token.
func TestOrderHeldOffBothTiersSpendsNoFallbackToken(t *testing.T) {
	f := newFlowFixture(t, degrade.Config{PerSKU: 8, FallbackLimit: rate.Every(time.Hour), FallbackBurst: 1})
	for _, sku := range []string{"b", "c"} {
		if err := f.d.PutOnSale(t.Context(), stock.Listing{SKU: sku, Units: 100}); err != nil {
			t.Fatal(err)
		}
	}
	f.rampBesideOpen("c", "b")
	both := stock.Order{ID: "bc", Items: []stock.Item{{SKU: "b", Qty: 1}, {SKU: "c", Qty: 1}}}
	if err := f.d.Deduct(t.Context(), both); !errors.Is(err, degrade.ErrBusy) {
		t.Fatalf("order of b and c, b open and c ramping: %v, want ErrBusy", err)
	}
	alone := stock.Order{ID: "b-alone", Items: []stock.Item{{SKU: "b", Qty: 1}}}
	if err := f.d.Deduct(t.Context(), alone); err != nil {
		t.Errorf("order of b alone, b's breaker open, the fallback's token unspent by any write: %v, want nil (taken at the fallback)", err)
	}
}
