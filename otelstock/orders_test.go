package otelstock_test

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/otelstock"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
)

// stockguard.orders counts each order operation the application calls
// once, at the outermost layer, where stockguard.calls counts it at every
// layer it passes through; operator calls (PutOnSale) are no orders.
func TestOrdersCountedOnceAtTheOutermostLayer(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"spans", "metrics alone"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := otelstock.Config{}
			if name == "metrics alone" {
				cfg.TracerProvider = noop.NewTracerProvider()
			}
			h := newHarness(t, cfg)
			obs := h.a.Observer()
			clk := newClock()
			primary := memstock.New(clk, memstock.WithObserver(obs))
			fallback := memstock.New(clk, memstock.WithObserver(obs))
			d, err := degrade.New(primary, fallback, degrade.Config{Clock: clk, Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			ctx := context.Background()
			for _, m := range []stock.Manager{primary, fallback} {
				if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 2}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 3 {
				_ = d.Deduct(ctx, stock.Order{ID: fmt.Sprint("o", i), Items: []stock.Item{{SKU: "a", Qty: 1}}})
			}
			if err := d.Confirm(ctx, "o0"); err != nil {
				t.Fatal(err)
			}
			ms := h.collect(t)
			orders := metric(t, ms, "stockguard.orders", "{call}")
			if n, m := sum(t, orders, deduct, ok), sum(t, orders, deduct, otelstock.KeyOutcome.String("sold_out")); n != 2 || m != 1 {
				t.Errorf("orders{deduct}: ok %d, sold_out %d; want 2, 1", n, m)
			}
			if n := sum(t, orders); n != 4 {
				t.Errorf("orders in all %d, want 4 (3 Deducts, 1 Confirm; no PutOnSale)", n)
			}
			if n := sum(t, metric(t, ms, "stockguard.calls", "{call}"), deduct); n != 6 {
				t.Errorf("calls{deduct} %d, want 6 (degrade and memstock each)", n)
			}
			if n, _ := hist[float64](t, metric(t, ms, "stockguard.order.duration", "s"), deduct); n != 3 {
				t.Errorf("order.duration{deduct} count %d, want 3", n)
			}
		})
	}
}
