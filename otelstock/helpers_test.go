package otelstock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/stockguard/stockguard/otelstock"
)

// harness is an Adapter over in-memory exporters: a ManualReader for the
// metrics and a SpanRecorder for the spans.
type harness struct {
	a      *otelstock.Adapter
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
}

func newHarness(t *testing.T, cfg otelstock.Config) *harness {
	t.Helper()
	h := &harness{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	cfg.MeterProvider = mp
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = tp
	}
	a, err := otelstock.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.a = a
	return h
}

// collect returns the metrics collected now, by name.
func (h *harness) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelstock.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otelstock.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// metric returns the metric name, failing the test if it is missing or its
// unit is not unit.
func metric(t *testing.T, ms map[string]metricdata.Metrics, name, unit string) metricdata.Metrics {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Fatalf("no metric %q; have %v", name, names(ms))
	}
	if m.Unit != unit {
		t.Errorf("%s: unit %q, want %q", name, m.Unit, unit)
	}
	return m
}

func names(ms map[string]metricdata.Metrics) []string {
	var out []string
	for n := range ms {
		out = append(out, n)
	}
	return out
}

// matches reports whether set has every attribute of want.
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum adds up the points of the counter m whose attributes include want.
func sum(t *testing.T, m metricdata.Metrics, want ...attribute.KeyValue) int64 {
	t.Helper()
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want an int64 sum", m.Name, m.Data)
	}
	if !s.IsMonotonic || s.Temporality != metricdata.CumulativeTemporality {
		t.Errorf("%s: monotonic %v, temporality %v", m.Name, s.IsMonotonic, s.Temporality)
	}
	var n int64
	for _, p := range s.DataPoints {
		if matches(p.Attributes, want) {
			n += p.Value
		}
	}
	return n
}

// hist returns the count and sum of the points of the histogram m whose
// attributes include want.
func hist[N int64 | float64](t *testing.T, m metricdata.Metrics, want ...attribute.KeyValue) (uint64, N) {
	t.Helper()
	h, ok := m.Data.(metricdata.Histogram[N])
	if !ok {
		t.Fatalf("%s is a %T", m.Name, m.Data)
	}
	var n uint64
	var s N
	for _, p := range h.DataPoints {
		if matches(p.Attributes, want) {
			n += p.Count
			s += p.Sum
		}
	}
	return n, s
}

// gauge returns the value of the one point of the gauge m whose attributes
// include want.
func gauge[N int64 | float64](t *testing.T, m metricdata.Metrics, want ...attribute.KeyValue) N {
	t.Helper()
	g, ok := m.Data.(metricdata.Gauge[N])
	if !ok {
		t.Fatalf("%s is a %T", m.Name, m.Data)
	}
	var found []N
	for _, p := range g.DataPoints {
		if matches(p.Attributes, want) {
			found = append(found, p.Value)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d points, want 1: %v", m.Name, want, len(found), g.DataPoints)
	}
	return found[0]
}

// fakeClock is a stock.Clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// The attributes tests filter on.
var (
	deduct  = otelstock.KeyOperation.String("deduct")
	confirm = otelstock.KeyOperation.String("confirm")
	ok      = otelstock.KeyOutcome.String("ok")
)

func component(c string) attribute.KeyValue { return otelstock.KeyComponent.String(c) }
func outcome(o string) attribute.KeyValue   { return otelstock.KeyOutcome.String(o) }
