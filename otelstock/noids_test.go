package otelstock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/stockguard/stockguard/limiter"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/otelstock"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// The order and user of every call in TestTelemetryCarriesNoIDs: each
// error the adapter sees names both, and neither may reach a span or a
// metric.
const (
	secretOrder = "o-4242-secret"
	secretUser  = "u-7777-secret"
)

// failingHook makes every command of a client fail, while on, with an error
// whose text names secretOrder and secretUser (as an error wrapping the
// caller's input would).
type failingHook struct{ on atomic.Bool }

func (h *failingHook) err() error {
	return fmt.Errorf("connection reset while sending order %q of user %q", secretOrder, secretUser)
}

func (h *failingHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *failingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() {
			cmd.SetErr(h.err())
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (h *failingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			for _, c := range cmds {
				c.SetErr(h.err())
			}
			return h.err()
		}
		return next(ctx, cmds)
	}
}

// No span (name, attribute, event, link, status) and no metric point
// carries the text of an error: failures whose errors name an order and a
// user — from a Redis gate, a tiered flow over it, a Redis limiter, a
// breaker change, a reconcile finding, and a business refusal reported
// with BusinessErrors set — leave only their outcome class.
func TestTelemetryCarriesNoIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, otelstock.Config{BusinessErrors: true})
	obs := h.a.Observer()
	clk := newClock()
	fail := &failingHook{}
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(fail)
	gate, err := redisstock.New(rdb, redisstock.Config{Clock: clk, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	record := memstock.New(clk, memstock.WithObserver(obs))
	flow := tiered.New(gate, record, tiered.Config{Observer: obs, Clock: clk})
	ctx := context.Background()
	if err := flow.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 5, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.NewRedis(rdb, limiter.RedisConfig{Limit: limiter.PerSecond(10), Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	h.spans.Reset()
	fail.on.Store(true)

	// Infrastructure failures of real calls, each error naming both IDs.
	order := stock.Order{ID: secretOrder, UserID: secretUser, Items: []stock.Item{{SKU: "phone", Qty: 1}}}
	errs := map[string]error{}
	errs["tiered.deduct"] = flow.Deduct(ctx, order)
	errs["redisstock.confirm"] = gate.Confirm(ctx, secretOrder)
	errs["redisstock.revert"] = gate.Revert(ctx, secretOrder)
	_, errs["redisstock.reclaim"] = gate.ReclaimExpired(ctx, 10)
	_, errs["limiter"] = lim.Allow(ctx, "user:"+secretUser)
	fail.on.Store(false)

	// Reported errors no component makes yet, through the same hooks.
	named := fmt.Errorf("order %q of user %q", secretOrder, secretUser)
	_, tr := obs.Track(ctx, "memstock", observe.OpConfirm, 0)
	tr.Done(fmt.Errorf("stock: unknown order %q of user %q: %w", secretOrder, secretUser, stock.ErrUnknownOrder))
	bctx, tr := obs.Track(ctx, "sqlstock", observe.OpDeduct, 1)
	obs.Batch(bctx, observe.Batch{Component: "sqlstock", Op: observe.OpDeduct, Size: 1, Err: errors.Join(named, stock.ErrUnknownOutcome)})
	tr.Done(errors.Join(named, stock.ErrUnknownOutcome))
	obs.Breaker(observe.Breaker{From: "primary", To: "degraded", Err: named})
	obs.Correction(observe.Correction{SKU: "phone", Action: "failed", Err: named})

	for what, err := range errs {
		if err == nil || !strings.Contains(err.Error(), secretOrder) {
			t.Fatalf("%s: error %v, want one naming %s (the test's premise)", what, err, secretOrder)
		}
	}

	// Every failure is still told, by its class.
	spans := h.spans.Ended()
	failed := map[string]bool{}
	for _, s := range spans {
		if s.Status().Code != codes.Error {
			continue
		}
		failed[s.Name()] = true
		class := attr(s, otelstock.KeyErrorType)
		if class == "" || !strings.HasSuffix(s.Name(), ".batch") && class != attr(s, otelstock.KeyOutcome) {
			t.Errorf("span %s: error.type %q, outcome %q", s.Name(), class, attr(s, otelstock.KeyOutcome))
		}
		if s.Status().Description != class || len(s.Events()) != 0 {
			t.Errorf("span %s: status %q and %d events, want the class %q and none", s.Name(), s.Status().Description, len(s.Events()), class)
		}
	}
	for _, name := range []string{"tiered.deduct", "redisstock.deduct", "redisstock.batch", "redisstock.confirm",
		"redisstock.revert", "redisstock.reclaim", "memstock.confirm", "sqlstock.deduct", "sqlstock.batch"} {
		if !failed[name] {
			t.Errorf("no failed span %s among %v", name, spanNames(spans))
		}
	}
	ms := h.collect(t)
	if n := sum(t, metric(t, ms, "stockguard.limiter.decisions", "{decision}"), otelstock.KeyDecision.String("error"), otelstock.KeyErrorType.String("error")); n != 1 {
		t.Errorf("limiter decisions that failed: %d, want 1", n)
	}
	if n := sum(t, metric(t, ms, "stockguard.breaker.transitions", "{transition}")); n != 1 {
		t.Errorf("breaker transitions: %d, want 1", n)
	}
	if n := sum(t, metric(t, ms, "stockguard.reconcile.corrections", "{correction}"), otelstock.KeyAction.String("failed")); n != 1 {
		t.Errorf("failed corrections: %d, want 1", n)
	}

	// And no text anywhere names the order or the user.
	for _, s := range spans {
		for _, text := range spanTexts(s) {
			if strings.Contains(text, secretOrder) || strings.Contains(text, secretUser) {
				t.Errorf("span %s carries %q", s.Name(), text)
			}
		}
	}
	for _, m := range ms {
		for _, text := range metricTexts(t, m) {
			if strings.Contains(text, secretOrder) || strings.Contains(text, secretUser) {
				t.Errorf("metric %s carries %q", m.Name, text)
			}
		}
	}
}

// spanTexts is every string s carries: its name, its attributes', events'
// and links' keys and values, and its status description.
func spanTexts(s sdktrace.ReadOnlySpan) []string {
	out := append([]string{s.Name(), s.Status().Description}, attrTexts(s.Attributes())...)
	for _, e := range s.Events() {
		out = append(append(out, e.Name), attrTexts(e.Attributes)...)
	}
	for _, l := range s.Links() {
		out = append(out, attrTexts(l.Attributes)...)
	}
	return out
}

// metricTexts is every string m carries: its name, description and unit,
// and the attributes of each point and of each point's exemplars.
func metricTexts(t *testing.T, m metricdata.Metrics) []string {
	out := []string{m.Name, m.Description, m.Unit}
	point := func(set attribute.Set, ex ...[]attribute.KeyValue) {
		out = append(out, attrTexts(set.ToSlice())...)
		for _, e := range ex {
			out = append(out, attrTexts(e)...)
		}
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			point(p.Attributes, exemplars(p.Exemplars)...)
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			point(p.Attributes, exemplars(p.Exemplars)...)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			point(p.Attributes, exemplars(p.Exemplars)...)
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			point(p.Attributes, exemplars(p.Exemplars)...)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			point(p.Attributes, exemplars(p.Exemplars)...)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			point(p.Attributes, exemplars(p.Exemplars)...)
		}
	default:
		t.Errorf("metric %s: data of type %T not walked", m.Name, m.Data)
	}
	return out
}

func exemplars[N int64 | float64](ex []metricdata.Exemplar[N]) [][]attribute.KeyValue {
	out := make([][]attribute.KeyValue, len(ex))
	for i, e := range ex {
		out[i] = e.FilteredAttributes
	}
	return out
}

func attrTexts(kvs []attribute.KeyValue) []string {
	out := make([]string, 0, 2*len(kvs))
	for _, kv := range kvs {
		out = append(out, string(kv.Key), kv.Value.String())
	}
	return out
}
