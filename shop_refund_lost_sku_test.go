package stockguard_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// refundedThroughALostSKU sells a paid order o1 of {a:1, b:1}; Redis then
// evicts b's state hash and keeps the rest (a's state, the order's line
// records). The refund finds the gate unavailable for b, so the flow
// refunds o1 at the record alone and reports a and b; the repair then
// raises the gate's a by the unit the record got back, and rebuilds b. The
// order is still confirmed at the gate. It returns the shop, its record
// (faults can be set on it) and a check that no SKU's gate has more units
// available than its record.
func refundedThroughALostSKU(t *testing.T) (*stockguard.Shop, *stocktest.Faulty, func(when string)) {
	var record *stocktest.Faulty
	shop, mr, _ := shopOn(t, stockguard.Config{Wrap: func(g tiered.GateStore, r tiered.RecordStore) (tiered.GateStore, tiered.RecordStore) {
		record = stocktest.NewFaulty(r)
		return g, record
	}})
	ctx := t.Context()
	for _, sku := range []string{"a", "b"} {
		if err := shop.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10, HoldTTL: 15 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	if err := shop.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := shop.Confirm(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	evicted := ""
	for _, k := range mr.Keys() {
		if strings.HasSuffix(k, "{b}:state") {
			evicted = k
		}
	}
	if evicted == "" || !mr.Del(evicted) {
		t.Fatalf("no state hash of b among %v", mr.Keys())
	}
	if err := shop.Revert(ctx, "o1"); err != nil {
		t.Fatalf("refund: %v", err)
	}
	if _, err := shop.Reconciler().RepairAll(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, sku := range []string{"a", "b"} {
			g, err := shop.Gate().Available(context.Background(), sku)
			if err != nil {
				t.Fatal(err)
			}
			r, err := shop.Record().Available(context.Background(), sku)
			if err != nil {
				t.Fatal(err)
			}
			if g > r {
				t.Fatalf("%s: SKU %s: gate %d available, record %d: the gate sells %d units the record does not have", when, sku, g, r, g-r)
			}
		}
	}
	check("after the refund and the repair")
	return shop, record, check
}

// A repeat of a refund that reached the record alone changes nothing: it
// refunded the gate's confirmed copy a second time, above the record.
func TestShopRefundThroughAGateThatLostOneSKUReturnsOnce(t *testing.T) {
	shop, _, check := refundedThroughALostSKU(t)
	if err := shop.Revert(t.Context(), "o1"); err != nil {
		t.Fatalf("repeated refund: %v", err)
	}
	check("after the repeated refund")
}

// The same repeat, when the record's read of the order (the flow's first
// step) fails once: the Revert answers that failure and changes nothing,
// and its retry changes nothing either. It went on to the gate.
func TestShopRepeatedRefundWithTheRecordReadFailingReturnsOnce(t *testing.T) {
	shop, record, check := refundedThroughALostSKU(t)
	var once atomic.Bool
	record.SetFaultFor(stocktest.Down, func(c stocktest.Call) bool {
		return c.Method == "Orders" && once.CompareAndSwap(false, true)
	})
	if err := shop.Revert(t.Context(), "o1"); err == nil {
		t.Fatal("repeated refund with the record's read failing: nil, want its error")
	}
	record.SetFault(stocktest.Healthy)
	check("after the repeated refund whose read failed")
	if err := shop.Revert(t.Context(), "o1"); err != nil {
		t.Fatalf("its retry: %v", err)
	}
	check("after the retry")
}
