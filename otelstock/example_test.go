package otelstock_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/stockguard/stockguard/otelstock"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
)

// Serve the library's metrics to Prometheus through OpenTelemetry's
// Prometheus exporter: an Adapter on a MeterProvider whose reader is the
// exporter, its Observer in the store's config, and /metrics served by
// promhttp from the exporter's registry.
func Example_prometheus() {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		panic(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	a, err := otelstock.New(otelstock.Config{MeterProvider: mp, TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		panic(err)
	}

	shop := memstock.New(stock.SystemClock, memstock.WithObserver(a.Observer()))
	if _, err := a.RegisterLevels(otelstock.Levels{Source: shop, Store: "shop", SKUs: []string{"phone"}}); err != nil {
		panic(err)
	}
	ctx := context.Background()
	_ = shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 2, HoldTTL: time.Minute})
	for _, id := range []string{"o1", "o2", "o3"} {
		_ = shop.Deduct(ctx, stock.Order{ID: id, Items: []stock.Item{{SKU: "phone", Qty: 1}}})
	}
	_ = shop.Confirm(ctx, "o1")

	// In a program: http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	printSeries(resp.Body, "stockguard_calls_total", "stockguard_call_duration_seconds_count", "stockguard_stock_")
	// Output:
	// stockguard_call_duration_seconds_count{stockguard_component="memstock",stockguard_operation="confirm",stockguard_outcome="ok"} 1
	// stockguard_call_duration_seconds_count{stockguard_component="memstock",stockguard_operation="deduct",stockguard_outcome="ok"} 2
	// stockguard_call_duration_seconds_count{stockguard_component="memstock",stockguard_operation="deduct",stockguard_outcome="sold_out"} 1
	// stockguard_call_duration_seconds_count{stockguard_component="memstock",stockguard_operation="put_on_sale",stockguard_outcome="ok"} 1
	// stockguard_calls_total{stockguard_component="memstock",stockguard_operation="confirm",stockguard_outcome="ok"} 1
	// stockguard_calls_total{stockguard_component="memstock",stockguard_operation="deduct",stockguard_outcome="ok"} 2
	// stockguard_calls_total{stockguard_component="memstock",stockguard_operation="deduct",stockguard_outcome="sold_out"} 1
	// stockguard_calls_total{stockguard_component="memstock",stockguard_operation="put_on_sale",stockguard_outcome="ok"} 1
	// stockguard_stock_available{stockguard_sku="phone",stockguard_store="shop"} 0
	// stockguard_stock_held{stockguard_sku="phone",stockguard_store="shop"} 1
	// stockguard_stock_sold{stockguard_sku="phone",stockguard_store="shop"} 1
}

// printSeries prints the exposition's sample lines that start with one of
// prefixes, in the exposition's (sorted) order.
func printSeries(r io.Reader, prefixes ...string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				fmt.Println(line)
			}
		}
	}
}
