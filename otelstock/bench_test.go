package otelstock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/otelstock"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
)

// BenchmarkDeduct measures what the adapter adds to a memstock Deduct (the
// cheapest call there is): none, metrics alone, metrics and sampled spans
// (no exporter).
func BenchmarkDeduct(b *testing.B) {
	for _, c := range []struct {
		name string
		obs  func(b *testing.B) observe.Observer
	}{
		{"none", func(*testing.B) observe.Observer { return observe.Observer{} }},
		{"metrics", func(b *testing.B) observe.Observer {
			return adapter(b, otelstock.Config{TracerProvider: noop.NewTracerProvider()})
		}},
		{"metrics+spans", func(b *testing.B) observe.Observer {
			return adapter(b, otelstock.Config{TracerProvider: sdktrace.NewTracerProvider()})
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			m := memstock.New(stock.SystemClock, memstock.WithObserver(c.obs(b)))
			ctx := context.Background()
			if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 1e9, HoldTTL: time.Hour}); err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := "o" + strconv.FormatInt(n.Add(1), 10)
					if err := m.Deduct(ctx, stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func adapter(b *testing.B, cfg otelstock.Config) observe.Observer {
	cfg.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	a, err := otelstock.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return a.Observer()
}
