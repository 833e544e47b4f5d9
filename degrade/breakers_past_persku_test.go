package degrade_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Package doc: "Before traffic returns, the recalibration (a reconcile
// pass) reads the record after every such write this node made";
// DESIGN.md invariant 6: "the gate never admits more than the record can
// take ... after every step". Here more SKUs than PerSKU have breakers
// that kept traffic off the primary and orders written at the record
// alone (in ForceFallback mode too): the first SKU's next order must
// still not reach the gate before a recalibration of it.
func TestEveryBreakerPastPerSKURecalibratesBeforeTraffic(t *testing.T) {
	for _, forced := range []bool{true, false} {
		t.Run(fmt.Sprint("forced=", forced), func(t *testing.T) {
			d, _, gate, record, recalibrated := perSKUOneOnMemTiers(t)
			ctx := t.Context()
			skus := []string{"a", "b", "c"}
			for _, sku := range skus {
				if err := d.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10}); err != nil {
					t.Fatal(err)
				}
			}
			n := 0
			buy := func(sku string) error {
				n++
				return d.Deduct(ctx, stock.Order{ID: fmt.Sprint("o", n), Items: []stock.Item{{SKU: sku, Qty: 1}}})
			}
			if forced {
				d.SetMode(degrade.ForceFallback)
			} else {
				gate.SetFault(stocktest.Down)
			}
			for _, sku := range skus {
				if !forced {
					for i := 0; d.State(sku) != degrade.Degraded; i++ {
						if i > 10 {
							t.Fatalf("breaker of %s never opened", sku)
						}
						_ = buy(sku)
					}
				}
				if err := buy(sku); err != nil { // at the record alone
					t.Fatalf("order of %s at the record alone: %v", sku, err)
				}
			}
			if forced {
				d.SetMode(degrade.Auto)
			} else {
				gate.SetFault(stocktest.Healthy)
			}
			deducts := gate.Calls("Deduct")
			_ = buy("a")
			if gate.Calls("Deduct") > deducts && !slices.Contains(recalibrated(), "a") {
				g, _ := gate.Manager.Available(ctx, "a")
				r, _ := record.Manager.Available(ctx, "a")
				t.Fatalf("an order of a reached the gate with no recalibration of a since its order at the record alone (breaker now %v): gate available %d, record %d",
					d.State("a"), g, r)
			}
		})
	}
}
