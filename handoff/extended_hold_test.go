package handoff_test

import (
	"context"
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

// The Consumer retries an infrastructure failure "for as long as the
// gate still holds the order, so an outage shorter than the hold loses
// no order": a pending order whose hold was extended
// (tiered.Manager.ExtendHold, which answers nil for a pending order)
// outlives the Deadline its message was published with, and a record
// outage shorter than the extended hold is retried past that Deadline,
// while the gate holds the order, until the record is back.
func TestExtendedPendingHoldIsRetriedWhileTheGateHoldsIt(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(t0)
	record := &outageRecord{Store: memstock.New(clock), clock: clock, back: t0.Add(20 * time.Minute)}
	q, gate, flow := extendedPending(t, clock, record)
	m := fetch(t, q.Source(), 1)[0].Message()
	var done error
	c, err := handoff.NewConsumer(q.Source(), flow, handoff.ConsumerConfig{Clock: clock,
		Done: func(_ context.Context, _ handoff.Message, err error) { done = err }})
	if err != nil {
		t.Fatal(err)
	}
	last := retryUntilEnded(ctx, c, m, clock, 400) // 5s backoff at most: 240 deliveries span the 20-minute outage
	g, _ := gate.Orders(ctx, []string{"o1"})
	gateHolds := len(g) == 1 && g[0].State == stock.StateHeld
	if last.ended != "acked" {
		at := clock.Now().Sub(t0)
		clock.Advance(t0.Add(25 * time.Minute).Sub(clock.Now())) // record back, hold still extended; the buyer pays
		cerr := flow.Confirm(ctx, "o1")
		t.Fatalf("delivery %d %s at %v (message Deadline %v, gate hold extended to %v, gate holds it: %v; Done: %v); Confirm after the 20-minute outage = %v; want retried until the record is back, recorded, then confirmed",
			last.attempt, last.ended, at, m.Deadline.Sub(t0), 40*time.Minute, gateHolds, done, cerr)
	}
}

// observe.Handoff.Expired counts orders that expired in the queue: a
// pending order whose hold was extended, delivered after the Deadline
// its message was published with and recorded (the gate held it still),
// did not expire, and is confirmed when the buyer pays.
func TestExtendedPendingHoldDeliveredLateIsNotCountedExpired(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(t0)
	q, _, flow := extendedPending(t, clock, memstock.New(clock))
	var seen []observe.Handoff
	c, err := handoff.NewConsumer(q.Source(), flow, handoff.ConsumerConfig{Clock: clock,
		Observer: observe.Observer{Handoff: func(_ context.Context, h observe.Handoff) { seen = append(seen, h) }}})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(15 * time.Minute) // past the message's Deadline, within the extended hold
	c.Settle(ctx, fetch(t, q.Source(), 1))
	if len(seen) != 1 || seen[0].Expired || seen[0].Outcome != observe.OK {
		t.Fatalf("reported %+v; want one recorded delivery, not expired", seen)
	}
	if err := flow.Confirm(ctx, "o1"); err != nil {
		t.Fatalf("Confirm = %v", err)
	}
}

// extendedPending is a flow over memstock tiers (record its record) with
// one pending order, o1: placed at t0 with a 10-minute hold (as its
// message's Deadline says), handed off to the returned queue, then
// extended at the gate to 40 minutes (a pending order's ExtendHold).
func extendedPending(t *testing.T, clock *stocktest.Clock, record tiered.RecordStore) (*handofftest.Memory, *memstock.Store, *tiered.Manager) {
	t.Helper()
	ctx := context.Background()
	q := handofftest.NewMemory(time.Hour)
	gate := memstock.New(clock)
	rec := handoff.NewRecorder(q, gate, handoff.RecorderConfig{Clock: clock})
	flow := tiered.New(gate, record, tiered.Config{Recorder: rec, Clock: clock, RecheckAfter: -1})
	if err := flow.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: 10 * time.Minute, MaxHoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if p, err := flow.Place(ctx, order("o1", 1)); err != nil || p != tiered.Pending {
		t.Fatalf("Place = %v, %v", p, err)
	}
	if err := flow.ExtendHold(ctx, "o1", t0.Add(40*time.Minute)); err != nil {
		t.Fatalf("ExtendHold = %v", err)
	}
	return q, gate, flow
}
