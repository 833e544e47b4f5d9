package stockguard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
)

// A paid order of two SKUs, {a:1, b:1}; Redis evicts b's state hash and
// keeps the rest (a's state, the order's line records). The refund finds
// the gate unavailable for b, so the flow refunds the order at the record
// alone and reports a and b; the repair then raises the gate's a by the
// unit the record got back, and rebuilds b. The order is still confirmed
// at the gate: a repeat of the refund refunded it there a second time, a
// unit of each SKU above the record. The flow reads the record first, and
// a repeat of an order the record returned changes nothing.
func TestShopRefundThroughAGateThatLostOneSKUReturnsOnce(t *testing.T) {
	shop, mr, _ := shopOn(t, stockguard.Config{})
	ctx := t.Context()
	for _, sku := range []string{"a", "b"} {
		if err := shop.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10, HoldTTL: 15 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	o := stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}}
	if err := shop.Deduct(ctx, o); err != nil {
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
	if evicted == "" || !mr.Del(evicted) { // Redis evicts b's state hash
		t.Fatalf("no state hash of b among %v", mr.Keys())
	}
	if err := shop.Revert(ctx, "o1"); err != nil { // the refund
		t.Fatalf("refund: %v", err)
	}
	if _, err := shop.Reconciler().RepairAll(ctx); err != nil { // the repair the drift asks for
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, sku := range []string{"a", "b"} {
			g, err := shop.Gate().Available(ctx, sku)
			if err != nil {
				t.Fatal(err)
			}
			r, err := shop.Record().Available(ctx, sku)
			if err != nil {
				t.Fatal(err)
			}
			if g > r {
				t.Fatalf("%s: SKU %s: gate %d available, record %d: the gate sells %d units the record does not have",
					when, sku, g, r, g-r)
			}
		}
	}
	check("after the refund and the repair")
	if err := shop.Revert(ctx, "o1"); err != nil { // the refund, repeated
		t.Fatalf("repeated refund: %v", err)
	}
	check("after the repeated refund")
}
