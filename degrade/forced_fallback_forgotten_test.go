package degrade_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// With per-SKU breakers, an order written at the record alone in
// ForceFallback mode must be read by a recalibration before its SKU's
// traffic returns to the gate (SetMode: "Leaving ForceFallback makes every
// breaker recalibrate and ramp back as after an outage"; package doc:
// "Before traffic returns, the recalibration ... reads the record after
// every such write this node made"), also when more SKUs than PerSKU are
// used while the operator holds the fallback: the forced mode never
// changes a breaker's own state, so the breaker that let the write
// through must not be forgotten before a recalibration has read it.
func TestForcedFallbackForgottenBreakerRecalibratesBeforeTraffic(t *testing.T) {
	d, _, gate, record, recalibrated := perSKUOneOnMemTiers(t)
	ctx := t.Context()
	for _, sku := range []string{"a", "b"} {
		if err := d.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10}); err != nil {
			t.Fatal(err)
		}
	}
	buy := func(id, sku string) error {
		return d.Deduct(ctx, stock.Order{ID: id, Items: []stock.Item{{SKU: sku, Qty: 1}}})
	}
	d.SetMode(degrade.ForceFallback)
	if err := buy("forced-a", "a"); err != nil { // at the record alone
		t.Fatal(err)
	}
	if err := buy("forced-b", "b"); err != nil { // b's breaker: past PerSKU
		t.Fatal(err)
	}
	d.SetMode(degrade.Auto)
	deducts := gate.Calls("Deduct")
	if err := buy("next-a", "a"); err != nil && !errors.Is(err, degrade.ErrBusy) {
		t.Fatal(err)
	}
	if gate.Calls("Deduct") > deducts && len(recalibrated()) == 0 {
		g, _ := gate.Manager.Available(ctx, "a")
		r, _ := record.Manager.Available(ctx, "a")
		t.Fatalf("after ForceFallback, an order of a reached the gate with no recalibration since the forced order at the record alone (breaker state now %v): gate available %d, record %d",
			d.State("a"), g, r)
	}
}

// perSKUOneOnMemTiers is a degrade Manager with PerSKU 1 (OpenFor a
// minute, no fallback limit) over a tiered flow of two memstock tiers, its
// clock, its gate and record (which the test can fault), and the keys its
// Recalibrate was called with so far (it reads nothing).
func perSKUOneOnMemTiers(t *testing.T) (d *degrade.Manager, clock *stocktest.Clock, gate, record *stocktest.Faulty, recalibrated func() []string) {
	clock = stocktest.NewClock(stocktest.Epoch)
	gate = stocktest.NewFaulty(memstock.New(clock))
	record = stocktest.NewFaulty(memstock.New(clock))
	flow := tiered.New(gate, record, tiered.Config{Clock: clock})
	var mu sync.Mutex
	var keys []string
	d = mustNew(t, flow, nil, degrade.Config{
		PerSKU: 1, Clock: clock, FallbackLimit: rate.Inf, OpenFor: time.Minute,
		Recalibrate: func(_ context.Context, key string) error {
			mu.Lock()
			keys = append(keys, key)
			mu.Unlock()
			return nil
		},
	})
	return d, clock, gate, record, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(keys)
	}
}
