package otelstock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/stockguard/stockguard/otelstock"
	"github.com/stockguard/stockguard/stock"
)

// store is what the scripted sequence drives.
type store interface {
	stock.Manager
	stock.Reclaimer
}

// script plays one fixed sequence on m: two listings, a restock, five
// Deducts (three taken, one sold out, one unknown SKU), a Confirm, a
// Revert of an unknown order, then a reclaim pass (a call too) 30s past the
// deadline of the one unpaid order (2 lines, 3 units).
func script(t *testing.T, m store, clk *fakeClock) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}))
	must(m.PutOnSale(ctx, stock.Listing{SKU: "b", Units: 5, HoldTTL: time.Minute}))
	must(m.Restock(ctx, stock.Restock{OpID: "r1", SKU: "a", Units: 2}))
	must(m.Deduct(ctx, stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 3}}}))
	must(m.Deduct(ctx, stock.Order{ID: "o2", UserID: "u2", Items: []stock.Item{{SKU: "a", Qty: 2}, {SKU: "b", Qty: 1}}}))
	if err := m.Deduct(ctx, stock.Order{ID: "o3", UserID: "u3", Items: []stock.Item{{SKU: "b", Qty: 10}}}); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("o3: %v, want ErrSoldOut", err)
	}
	if err := m.Deduct(ctx, stock.Order{ID: "o4", UserID: "u4", Items: []stock.Item{{SKU: "nope", Qty: 1}}}); !errors.Is(err, stock.ErrUnknownSKU) {
		t.Fatalf("o4: %v, want ErrUnknownSKU", err)
	}
	must(m.Deduct(ctx, stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 3}}})) // a repeat: takes nothing
	must(m.Confirm(ctx, "o1"))
	if err := m.Revert(ctx, "ghost"); !errors.Is(err, stock.ErrUnknownOrder) {
		t.Fatalf("revert ghost: %v, want ErrUnknownOrder", err)
	}
	clk.advance(90 * time.Second)
	got, err := m.ReclaimExpired(ctx, 100)
	must(err)
	if len(got) != 2 {
		t.Fatalf("reclaimed %v, want o2's two lines", got)
	}
}

// checkScript asserts the metrics and spans script leaves, for a store that
// reports as comp. The levels of "a" and "b" were registered as store "s".
func checkScript(t *testing.T, h *harness, comp string) {
	t.Helper()
	ms := h.collect(t)
	c := component(comp)

	calls := metric(t, ms, "stockguard.calls", "{call}")
	for _, w := range []struct {
		op, outcome string
		n           int64
	}{
		{"put_on_sale", "ok", 2}, {"restock", "ok", 1},
		{"deduct", "ok", 3}, {"deduct", "sold_out", 1}, {"deduct", "unknown_sku", 1},
		{"confirm", "ok", 1}, {"revert", "unknown_order", 1}, {"reclaim", "ok", 1},
	} {
		if n := sum(t, calls, c, otelstock.KeyOperation.String(w.op), outcome(w.outcome)); n != w.n {
			t.Errorf("stockguard.calls{%s %s %s} = %d, want %d", comp, w.op, w.outcome, n, w.n)
		}
	}
	if n := sum(t, calls); n != 11 {
		t.Errorf("stockguard.calls in all = %d, want 11", n)
	}
	dur := metric(t, ms, "stockguard.call.duration", "s")
	if n, s := hist[float64](t, dur, c, deduct, ok); n != 3 || s <= 0 || s > 10 {
		t.Errorf("stockguard.call.duration{deduct ok}: count %d sum %gs, want 3 calls of a positive duration", n, s)
	}
	if n, _ := hist[float64](t, dur); n != 11 {
		t.Errorf("stockguard.call.duration: count %d, want 11", n)
	}

	if n := sum(t, metric(t, ms, "stockguard.reclaim.units", "{unit}"), c); n != 3 {
		t.Errorf("stockguard.reclaim.units = %d, want 3", n)
	}
	if n := sum(t, metric(t, ms, "stockguard.reclaim.orders", "{order}"), c); n != 1 {
		t.Errorf("stockguard.reclaim.orders = %d, want 1", n)
	}
	if n := sum(t, metric(t, ms, "stockguard.reclaim.passes", "{pass}"), c, ok); n != 1 {
		t.Errorf("stockguard.reclaim.passes{ok} = %d, want 1", n)
	}
	if lag := gauge[float64](t, metric(t, ms, "stockguard.reclaim.lag", "s"), c); lag != 30 {
		t.Errorf("stockguard.reclaim.lag = %gs, want 30s", lag)
	}

	// a: 10 + 2 restocked - 3 sold (o2's 2 returned); b: 5, o2's 1 returned.
	for _, w := range []struct {
		name, sku string
		n         int64
	}{
		{"stockguard.stock.available", "a", 9}, {"stockguard.stock.held", "a", 0}, {"stockguard.stock.sold", "a", 3},
		{"stockguard.stock.available", "b", 5}, {"stockguard.stock.held", "b", 0}, {"stockguard.stock.sold", "b", 0},
	} {
		v := gauge[int64](t, metric(t, ms, w.name, "{unit}"), otelstock.KeyStore.String("s"), otelstock.KeySKU.String(w.sku))
		if v != w.n {
			t.Errorf("%s{%s} = %d, want %d", w.name, w.sku, v, w.n)
		}
	}

	// One span per call, named component.operation, items and outcome set;
	// only the two refusals carry error.type, and neither is an Error.
	var calls0, errs int
	for _, s := range h.spans.Ended() {
		if s.Name() == comp+".batch" {
			continue
		}
		calls0++
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		if want := comp + "." + attrs["stockguard.operation"]; s.Name() != want {
			t.Errorf("span %q, want %q", s.Name(), want)
		}
		if attrs["stockguard.component"] != comp || attrs["stockguard.outcome"] == "" || attrs["stockguard.items"] == "" {
			t.Errorf("span %s attributes %v", s.Name(), attrs)
		}
		if s.Name() == comp+".deduct" && attrs["stockguard.items"] == "0" {
			t.Errorf("deduct span with 0 items: %v", attrs)
		}
		if s.Parent().IsValid() {
			t.Errorf("span %s has a parent: the script's calls are roots", s.Name())
		}
		if e := attrs["error.type"]; e != "" {
			errs++
			if e != attrs["stockguard.outcome"] {
				t.Errorf("span %s: error.type %q, outcome %q", s.Name(), e, attrs["stockguard.outcome"])
			}
		}
		if s.Status().Code == codes.Error {
			t.Errorf("span %s has status Error for a business outcome", s.Name())
		}
		for _, kv := range s.Attributes() {
			if v := kv.Value.String(); v == "o1" || v == "u1" || v == "ghost" {
				t.Errorf("span %s carries an order or user ID: %v", s.Name(), kv)
			}
		}
	}
	if calls0 != 11 || errs != 3 {
		t.Errorf("%d call spans (%d with error.type), want 11 (3: sold out, unknown SKU, unknown order)", calls0, errs)
	}
}
