package otelstock_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/stockguard/stockguard/limiter"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/otelstock"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
)

// The breaker gauges hold each breaker's last state, as one series per
// state (1 for the state it is in, 0 for the others), from the report of
// the breaker as it is made on; every change is counted with its states,
// and the report as made is no change.
func TestBreakerGauges(t *testing.T) {
	t.Parallel()
	h := newHarness(t, otelstock.Config{})
	o := h.a.Observer()
	o.Breaker(observe.Breaker{Name: "", To: "primary", Share: 1})
	ms := h.collect(t)
	shared, sku := otelstock.KeyBreaker.String(""), otelstock.KeyBreaker.String("sku-1")
	status := func(ms map[string]metricdata.Metrics, b attribute.KeyValue) map[string]int64 {
		out := map[string]int64{}
		for _, s := range otelstock.BreakerStates {
			out[s] = gauge[int64](t, metric(t, ms, "stockguard.breaker.status", "{state}"), b, otelstock.KeyBreakerState.String(s))
		}
		return out
	}
	if got, want := status(ms, shared), map[string]int64{"primary": 1, "degraded": 0, "recalibrating": 0, "ramping": 0}; !maps.Equal(got, want) {
		t.Errorf("as made: breaker.status %v, want %v", got, want)
	}
	if _, ok := ms["stockguard.breaker.transitions"]; ok {
		t.Errorf("the report of a breaker as made was counted as a transition")
	}

	for _, b := range []observe.Breaker{
		{Name: "", From: "primary", To: "degraded"},
		{Name: "sku-1", From: "primary", To: "degraded"},
		{Name: "", From: "degraded", To: "recalibrating"},
		{Name: "", From: "recalibrating", To: "ramping", Share: 0.25},
		{Name: "", From: "ramping", To: "ramping", Share: 0.5},
		{Name: "sku-1", From: "degraded", To: "recalibrating"},
	} {
		o.Breaker(b)
	}
	ms = h.collect(t)
	if got, want := status(ms, shared), map[string]int64{"primary": 0, "degraded": 0, "recalibrating": 0, "ramping": 1}; !maps.Equal(got, want) {
		t.Errorf("shared breaker.status %v, want %v", got, want)
	}
	if got, want := status(ms, sku), map[string]int64{"primary": 0, "degraded": 0, "recalibrating": 1, "ramping": 0}; !maps.Equal(got, want) {
		t.Errorf("sku-1 breaker.status %v, want %v", got, want)
	}
	if v := gauge[float64](t, metric(t, ms, "stockguard.breaker.share", "1"), shared); v != 0.5 {
		t.Errorf("breaker.share = %g, want 0.5", v)
	}
	tr := metric(t, ms, "stockguard.breaker.transitions", "{transition}")
	if n := sum(t, tr, shared); n != 4 {
		t.Errorf("shared transitions %d, want 4", n)
	}
	if n := sum(t, tr, otelstock.KeyBreakerFrom.String("primary"), otelstock.KeyBreakerTo.String("degraded")); n != 2 {
		t.Errorf("primary->degraded %d, want 2", n)
	}
}

// Reconcile findings are counted by action, with the size of each change;
// no point names a SKU.
func TestCorrections(t *testing.T) {
	t.Parallel()
	h := newHarness(t, otelstock.Config{})
	o := h.a.Observer()
	o.Correction(observe.Correction{SKU: "a", Action: "corrected", Delta: -3})
	o.Correction(observe.Correction{SKU: "b", Action: "corrected", Delta: 2})
	o.Correction(observe.Correction{SKU: "c", Action: "left", Delta: 500})
	ms := h.collect(t)
	act := func(a string) attribute.KeyValue { return otelstock.KeyAction.String(a) }
	c, u := metric(t, ms, "stockguard.reconcile.corrections", "{correction}"), metric(t, ms, "stockguard.reconcile.units", "{unit}")
	if n, m := sum(t, c, act("corrected")), sum(t, c, act("left")); n != 2 || m != 1 {
		t.Errorf("corrections: corrected %d, left %d; want 2, 1", n, m)
	}
	if n, m := sum(t, u, act("corrected")), sum(t, u, act("left")); n != 5 || m != 500 {
		t.Errorf("units: corrected %d, left %d; want 5, 500", n, m)
	}
	for _, m := range []string{"stockguard.reconcile.corrections", "stockguard.reconcile.units"} {
		if sum(t, ms[m], otelstock.KeySKU.String("a")) != 0 {
			t.Errorf("%s carries a SKU", m)
		}
	}
}

// A real limiter's decisions: a burst of 2 allows 2 of 5 at once.
func TestLimiterDecisions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, otelstock.Config{})
	l, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: 2, Period: time.Hour, Burst: 2}, Observer: h.a.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := l.Allow(context.Background(), "u1"); err != nil {
			t.Fatal(err)
		}
	}
	ms := h.collect(t)
	d := metric(t, ms, "stockguard.limiter.decisions", "{decision}")
	local := otelstock.KeyLimiter.String("local")
	decision := func(d string) attribute.KeyValue { return otelstock.KeyDecision.String(d) }
	if y, n := sum(t, d, local, decision("allowed")), sum(t, d, local, decision("refused")); y != 2 || n != 3 {
		t.Errorf("decisions: allowed %d, refused %d; want 2, 3", y, n)
	}
	if n := sum(t, d, ok); n != 0 {
		t.Errorf("%d decisions carry outcome ok: a refusal is no success", n)
	}
	// A decision that could not be made is an error, with its class.
	h.a.Observer().Limit(context.Background(), observe.Limit{Limiter: "redis", N: 1, Err: stock.ErrUnavailable})
	d = metric(t, h.collect(t), "stockguard.limiter.decisions", "{decision}")
	if n := sum(t, d, otelstock.KeyLimiter.String("redis"), decision("error"), otelstock.KeyErrorType.String("unavailable")); n != 1 {
		t.Errorf("decisions{redis, error, unavailable} = %d, want 1", n)
	}
	if n, _ := hist[float64](t, metric(t, ms, "stockguard.limiter.duration", "s"), local); n != 5 {
		t.Errorf("limiter.duration count %d, want 5", n)
	}
}

// A noop TracerProvider leaves Begin unset: no span, no derived context.
func TestNoopTracerLeavesBeginUnset(t *testing.T) {
	t.Parallel()
	a, err := otelstock.New(otelstock.Config{TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	if o := a.Observer(); o.Begin != nil || o.End == nil {
		t.Errorf("noop tracer: Begin set %v, End set %v; want only End", o.Begin != nil, o.End != nil)
	}
	if o := newHarness(t, otelstock.Config{}).a.Observer(); o.Begin == nil {
		t.Errorf("SDK tracer: Begin unset")
	}

	// The application's own span around a call is left alone: not ended,
	// no attribute added.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := tp.Tracer("app").Start(context.Background(), "checkout")
	m := memstock.New(stock.SystemClock, memstock.WithObserver(a.Observer()))
	_ = m.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "none", Qty: 1}}})
	if !parent.IsRecording() || len(rec.Ended()) != 0 {
		t.Fatalf("the application's span was ended by the adapter")
	}
	parent.End()
	if got := rec.Ended(); len(got) != 1 || len(got[0].Attributes()) != 0 || got[0].Status().Code != codes.Unset {
		t.Errorf("the application's span was changed: %v %v", got[0].Attributes(), got[0].Status())
	}
}
