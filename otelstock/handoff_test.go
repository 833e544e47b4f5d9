package otelstock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/otelstock"
	"github.com/stockguard/stockguard/stock"
)

type settleFunc func(context.Context, stock.Order) error

func (f settleFunc) Settle(ctx context.Context, o stock.Order) error { return f(ctx, o) }

// A Consumer's deliveries are counted by outcome, dead letters apart, with
// their lag, and those whose gate hold had ended counted expired.
func TestHandoffMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, otelstock.Config{})
	q := handofftest.NewMemory(time.Hour)
	now := time.Now()
	_ = q.Publish(ctx, handoff.Message{Order: stock.Order{ID: "late", Items: []stock.Item{{SKU: "a", Qty: 1}}},
		Sent: now.Add(-2 * time.Second), Deadline: now.Add(-time.Second)})
	_ = q.Publish(ctx, handoff.Message{Sent: now}) // an order that cannot settle
	settle := func(_ context.Context, o stock.Order) error {
		if o.ID == "late" {
			return stock.ErrHoldExpired // the gate's hold ended while it was queued
		}
		return o.Validate()
	}
	c, err := handoff.NewConsumer(q.Source(), settleFunc(settle),
		handoff.ConsumerConfig{Observer: h.a.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ds, err := q.Source().Fetch(fctx, 8)
	if err != nil || len(ds) != 2 {
		t.Fatalf("Fetch = %d, %v", len(ds), err)
	}
	c.Settle(ctx, ds)
	ms := h.collect(t)
	m := metric(t, ms, "stockguard.handoff.messages", "{message}")
	if expired, dead := sum(t, m, otelstock.KeyOutcome.String("expired")), sum(t, m, otelstock.KeyOutcome.String("dead_lettered")); expired != 1 || dead != 1 {
		t.Errorf("handoff.messages: expired %d, dead_lettered %d; want 1, 1", expired, dead)
	}
	if n := sum(t, metric(t, ms, "stockguard.handoff.expired", "{message}")); n != 1 {
		t.Errorf("handoff.expired = %d, want 1", n)
	}
	n, s := hist[float64](t, metric(t, ms, "stockguard.handoff.lag", "s"))
	if n != 2 || s < 2 {
		t.Errorf("handoff.lag: %d points summing %.3fs; want 2, at least the 2s the late one waited", n, s)
	}
}
