package stockguard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
)

// partlyRefundedThroughALostSKU sells a paid order o1 of {a:2, b:2}; Redis
// then evicts b's state hash and keeps the rest. The partial refund r of
// {a:1, b:1} finds the gate unavailable for b, so the flow gives r back at
// the record alone and reports a and b; the repair then raises the gate's
// a by the unit the record got back, and rebuilds b. The order is still a
// sale of {a:2, b:2} at the gate. It returns the shop, r and a check that
// no SKU's gate has more units available than its record.
func partlyRefundedThroughALostSKU(t *testing.T) (*stockguard.Shop, stock.Return, func(when string)) {
	shop, mr, _ := shopOn(t, stockguard.Config{})
	ctx := t.Context()
	for _, sku := range []string{"a", "b"} {
		if err := shop.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10, HoldTTL: 15 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	if err := shop.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 2}, {SKU: "b", Qty: 2}}}); err != nil {
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
	r := stock.Return{OrderID: "o1", OpID: "r1", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}}
	if err := shop.RevertItems(ctx, r); err != nil {
		t.Fatalf("partial refund: %v", err)
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
			rec, err := shop.Record().Available(context.Background(), sku)
			if err != nil {
				t.Fatal(err)
			}
			if g > rec {
				t.Fatalf("%s: SKU %s: gate %d available, record %d: the gate sells %d units the record does not have", when, sku, g, rec, g-rec)
			}
		}
	}
	check("after the partial refund and the repair")
	return shop, r, check
}

// A repeat of a partial refund that reached the record alone gives
// nothing back a second time at the gate.
func TestShopPartialRefundThroughAGateThatLostOneSKUReturnsOnce(t *testing.T) {
	shop, r, check := partlyRefundedThroughALostSKU(t)
	if err := shop.RevertItems(t.Context(), r); err != nil {
		t.Fatalf("repeated partial refund: %v", err)
	}
	check("after the repeated partial refund")
}

// A refund of the rest of that order gives back, at the gate, none of the
// units the record already gave back (nor the rest: the gate's copy is a
// sale, whose units reconciliation counts back from the record).
func TestShopRefundAfterAPartialRefundAtTheRecordAloneReturnsOnce(t *testing.T) {
	shop, _, check := partlyRefundedThroughALostSKU(t)
	if err := shop.Revert(t.Context(), "o1"); err != nil {
		t.Fatalf("refund of the rest: %v", err)
	}
	check("after the refund of the rest")
	if _, err := shop.Reconciler().RepairAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, sku := range []string{"a", "b"} {
		g, err := shop.Gate().Available(t.Context(), sku)
		if err != nil {
			t.Fatal(err)
		}
		if g != 10 {
			t.Fatalf("SKU %s after the refund and a repair: gate %d available, want all 10 back", sku, g)
		}
	}
}

// A new partial refund of that order, after the one that reached the
// record alone, is given back once too.
func TestShopSecondPartialRefundAfterOneAtTheRecordAloneReturnsOnce(t *testing.T) {
	shop, _, check := partlyRefundedThroughALostSKU(t)
	if err := shop.RevertItems(t.Context(), stock.Return{OrderID: "o1", OpID: "r2", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
		t.Fatalf("second partial refund: %v", err)
	}
	check("after the second partial refund")
	if _, err := shop.Reconciler().RepairAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	for sku, want := range map[string]int64{"a": 10, "b": 9} {
		g, err := shop.Gate().Available(t.Context(), sku)
		if err != nil {
			t.Fatal(err)
		}
		r, err := shop.Record().Available(t.Context(), sku)
		if err != nil {
			t.Fatal(err)
		}
		if g != want || r != want {
			t.Fatalf("SKU %s after both partial refunds and a repair: gate %d, record %d available, want %d", sku, g, r, want)
		}
	}
}
