package otelstock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockguard/stockguard/otelstock"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/tiered"
)

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.String()
		}
	}
	return ""
}

// A tiered Deduct is one span whose children are the gate's Deduct and
// its recheck and the record's Deduct (Begin hands the tiers the span's
// context); each gate Deduct's batch is the child of that Deduct.
func TestTieredSpansNest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, otelstock.Config{})
	obs := h.a.Observer()
	clk := newClock()
	gate := newRedisStore(t, h, clk, "miniredis")
	record := memstock.New(clk, memstock.WithObserver(obs))
	flow := tiered.New(gate, record, tiered.Config{Observer: obs, Clock: clk})
	ctx := context.Background()
	for _, sku := range []string{"a", "b"} {
		if err := flow.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 5, HoldTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	h.spans.Reset()
	if err := flow.Deduct(ctx, stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 2}, {SKU: "b", Qty: 1}}}); err != nil {
		t.Fatal(err)
	}
	spans := h.spans.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var root sdktrace.ReadOnlySpan
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
		if s.Name() == "tiered.deduct" {
			root = s
		}
	}
	if root == nil || root.Parent().IsValid() {
		t.Fatalf("spans %v: want tiered.deduct as the root", spanNames(spans))
	}
	if got := attr(root, otelstock.KeyItems); got != "2" {
		t.Errorf("tiered.deduct items = %s, want 2", got)
	}
	// parent name -> child name -> count
	tree := map[string]map[string]int{}
	for _, s := range spans {
		if s == root {
			continue
		}
		p, ok := byID[s.Parent().SpanID()]
		if !ok || s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("span %s is outside the tiered trace", s.Name())
			continue
		}
		if s.StartTime().Before(p.StartTime()) {
			t.Errorf("span %s starts before its parent %s", s.Name(), p.Name())
		}
		if tree[p.Name()] == nil {
			tree[p.Name()] = map[string]int{}
		}
		tree[p.Name()][s.Name()]++
	}
	want := map[string]map[string]int{
		"tiered.deduct":     {"redisstock.deduct": 2, "memstock.deduct": 1},
		"redisstock.deduct": {"redisstock.batch": 2},
	}
	if fmt.Sprint(tree) != fmt.Sprint(want) {
		t.Errorf("span tree %v, want %v", tree, want)
	}
	for _, s := range spans {
		if s.Name() == "redisstock.batch" && attr(s, otelstock.KeyBatchSize) != "1" {
			t.Errorf("batch span size %s, want 1", attr(s, otelstock.KeyBatchSize))
		}
	}

	// Metrics tell the levels apart by component.
	ms := h.collect(t)
	calls := metric(t, ms, "stockguard.calls", "{call}")
	n, g, r := sum(t, calls, component("tiered"), deduct, ok), sum(t, calls, component("redisstock"), deduct, ok), sum(t, calls, component("memstock"), deduct, ok)
	if n != 1 || g != 2 || r != 1 {
		t.Errorf("deducts: tiered %d, redisstock %d, memstock %d; want 1, 2, 1", n, g, r)
	}
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name()+"<"+s.Parent().SpanID().String())
	}
	return out
}

// An infrastructure failure sets the span's status to Error, described by
// the outcome class (never the error's text, which may name the order);
// the call is counted under its class.
func TestInfrastructureFailureIsAnError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, otelstock.Config{})
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := redisstock.New(rdb, redisstock.Config{Observer: h.a.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	mr.Close()
	err = s.Confirm(context.Background(), "o1")
	if err == nil || stock.IsBusiness(err) {
		t.Fatalf("Confirm on a stopped Redis: %v, want an infrastructure failure", err)
	}
	spans := h.spans.Ended()
	if len(spans) != 1 {
		t.Fatalf("spans %v", spanNames(spans))
	}
	sp := spans[0]
	class := attr(sp, otelstock.KeyOutcome)
	if class == "ok" || class == "" || attr(sp, otelstock.KeyErrorType) != class {
		t.Errorf("outcome %q, error.type %q", class, attr(sp, otelstock.KeyErrorType))
	}
	if sp.Status().Code != codes.Error || sp.Status().Description != class {
		t.Errorf("status %v, want Error %q", sp.Status(), class)
	}
	if len(sp.Events()) != 0 {
		t.Errorf("events %v, want none (an exception event would copy the error's text)", sp.Events())
	}
	if n := sum(t, metric(t, h.collect(t), "stockguard.calls", "{call}"), confirm, outcome(class)); n != 1 {
		t.Errorf("stockguard.calls{confirm %s} = %d, want 1", class, n)
	}
}

// BusinessErrors makes a refusal an Error span too; Attributes land on
// every span and metric point.
func TestBusinessErrorsAndAttributes(t *testing.T) {
	t.Parallel()
	node := attribute.String("node", "n1")
	h := newHarness(t, otelstock.Config{BusinessErrors: true, Attributes: []attribute.KeyValue{node}})
	m := memstock.New(newClock(), memstock.WithObserver(h.a.Observer()))
	ctx := context.Background()
	if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 1, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	err := m.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 2}}})
	if !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("Deduct: %v, want ErrSoldOut", err)
	}
	for _, sp := range h.spans.Ended() {
		if attr(sp, "node") != "n1" {
			t.Errorf("span %s has no node attribute", sp.Name())
		}
		if sp.Name() == "memstock.deduct" && sp.Status().Code != codes.Error {
			t.Errorf("sold-out span status %v, want Error with BusinessErrors", sp.Status())
		}
	}
	calls := metric(t, h.collect(t), "stockguard.calls", "{call}")
	if n := sum(t, calls, node, deduct, outcome("sold_out")); n != 1 {
		t.Errorf("stockguard.calls{node deduct sold_out} = %d, want 1", n)
	}
	if n := sum(t, calls); n != sum(t, calls, node) {
		t.Errorf("a point without the node attribute")
	}
}
