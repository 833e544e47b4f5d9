package handoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// Message.Deadline "is when the gate hold ends", and a message delivered
// after it "is counted as expired in the queue". An order answered
// half-way (its hold time unread twice) and retried later is published
// with the gate's deadline of its hold, which began with the first
// attempt, so a delivery after the gate hold ended is reported expired.
func TestHalfWayRetryIsPublishedWithTheGatesDeadline(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(t0)
	q := handofftest.NewMemory(time.Hour)
	gate := memstock.New(clock)
	levels := &blinkingLevels{Store: gate, fails: 2}
	record := memstock.New(clock)
	rec := handoff.NewRecorder(q, levels, handoff.RecorderConfig{Clock: clock})
	flow := tiered.New(gate, record, tiered.Config{Recorder: rec, Clock: clock, RecheckAfter: -1})
	if err := flow.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Place(ctx, order("o1", 1)); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Place = %v; want half-way", err)
	}
	clock.Advance(8 * time.Minute) // the buyer's client retries late
	if p, err := flow.Place(ctx, order("o1", 1)); err != nil || p != tiered.Pending {
		t.Fatalf("retry = %v, %v", p, err)
	}
	g, _ := gate.Orders(ctx, []string{"o1"})
	m := fetch(t, q.Source(), 1)[0].Message()
	if len(g) == 1 && !m.Deadline.Equal(g[0].Deadline) {
		t.Errorf("message Deadline %v, gate hold ends %v (Deadline must be when the gate hold ends)", m.Deadline, g[0].Deadline)
	}

	// Delivered once the gate hold has ended and been returned.
	clock.Advance(3 * time.Minute)
	if _, err := flow.ReclaimExpired(ctx, 100); err != nil {
		t.Fatal(err)
	}
	var seen []observe.Handoff
	var done error
	c, err := handoff.NewConsumer(q.Source(), flow, handoff.ConsumerConfig{Clock: clock,
		Observer: observe.Observer{Handoff: func(_ context.Context, h observe.Handoff) { seen = append(seen, h) }},
		Done:     func(_ context.Context, _ handoff.Message, err error) { done = err }})
	if err != nil {
		t.Fatal(err)
	}
	d := &stepDelivery{m: m, attempt: 1}
	c.Settle(ctx, []handoff.Delivery{d})
	if len(seen) != 1 || !seen[0].Expired {
		t.Fatalf("delivery %s (%v) 11 minutes after a 10-minute gate hold began, reported %+v; want it counted expired in the queue", d.ended, done, seen)
	}
}
