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

// Mode ForceFallback "sends all traffic to the fallback (rate limited)";
// Place: an order "is written at the fallback alone only if all of them
// [its SKUs' breakers] are open" (ForceFallback holds every breaker
// open). Config.PerSKU is only how many breakers are kept; nothing says
// an order naming more SKUs than that is refused. With FallbackLimit
// rate.Inf the fallback's token bucket refuses nothing, so ErrBusy has no
// cause here.
func TestForcedFallbackTakesAnOrderWithMoreSKUsThanPerSKU(t *testing.T) {
	f := newFixture(t, degrade.Config{PerSKU: 2})
	for _, sku := range []string{"a", "b", "c"} {
		f.sale(sku, 10)
	}
	f.d.SetMode(degrade.ForceFallback)
	o := stock.Order{ID: "abc", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}, {SKU: "c", Qty: 1}}}
	err := f.d.Deduct(t.Context(), o)
	if err != nil {
		t.Fatalf("ForceFallback, PerSKU 2, an order of 3 SKUs: %v (fallback Deducts %d); want it taken by the fallback",
			err, f.fallback.Calls("Deduct"))
	}
	if n := f.fallback.Calls("Deduct"); n != 1 {
		t.Fatalf("fallback Deducts %d, want 1", n)
	}
}

// The same order while the primary is down in Auto mode: once every
// breaker of its SKUs is open, the order goes to the fallback (package
// doc: "an order's SKUs move to the fallback together, so an order of
// several SKUs reaches it within their breakers' threshold
// (Config.ReadyToTrip) while the primary is down"). Exact: with the
// default rule (5 consecutive failures), after 20 attempts of the same
// 3-SKU order, some attempt must have been written at the fallback.
func TestAutoFallbackTakesAnOrderWithMoreSKUsThanPerSKU(t *testing.T) {
	f := newFixture(t, degrade.Config{PerSKU: 2, OpenFor: time.Hour})
	for _, sku := range []string{"a", "b", "c"} {
		f.sale(sku, 100)
	}
	f.primary.SetFault(stocktest.Down)
	var last error
	for i := range 20 {
		o := stock.Order{ID: fmt.Sprint("o", i), Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}, {SKU: "c", Qty: 1}}}
		last = f.d.Deduct(t.Context(), o)
		if last == nil {
			return
		}
	}
	t.Fatalf("primary down, PerSKU 2, 20 attempts of a 3-SKU order: none taken by the fallback (fallback Deducts %d), last error %v, busy %v",
		f.fallback.Calls("Deduct"), last, errors.Is(last, degrade.ErrBusy))
}

// Config.PerSKU: of an order of more SKUs than PerSKU, "the others count
// failures once those have opened, so the order reaches the fallback
// after about ReadyToTrip's threshold once per PerSKU of its SKUs". With
// PerSKU 2 and the default rule (5 consecutive failures), an order of 5
// SKUs is taken by the fallback within 3×5+1 attempts.
func TestAutoFallbackTakesAnOrderOfMoreThanTwicePerSKUSKUs(t *testing.T) {
	f := newFixture(t, degrade.Config{PerSKU: 2, OpenFor: time.Hour})
	skus := []string{"a", "b", "c", "d", "e"}
	var items []stock.Item
	for _, sku := range skus {
		f.sale(sku, 100)
		items = append(items, stock.Item{SKU: sku, Qty: 1})
	}
	f.primary.SetFault(stocktest.Down)
	var last error
	for i := range 16 {
		last = f.d.Deduct(t.Context(), stock.Order{ID: fmt.Sprint("o", i), Items: items})
		if last == nil {
			return
		}
	}
	t.Fatalf("primary down, PerSKU 2, 16 attempts of a 5-SKU order: none taken by the fallback (fallback Deducts %d), last error %v",
		f.fallback.Calls("Deduct"), last)
}
