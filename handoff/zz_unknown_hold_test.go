package handoff_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// zzBlinkingLevels is the gate as the Recorder reads it, whose first
// Levels read fails (a Redis blip, a pool timeout) and the rest answer.
type zzBlinkingLevels struct {
	*memstock.Store
	calls atomic.Int64
}

func (g *zzBlinkingLevels) Levels(ctx context.Context, sku string) (stock.Levels, error) {
	if g.calls.Add(1) == 1 {
		return stock.Levels{}, errors.New("redis: i/o timeout")
	}
	return g.Store.Levels(ctx, sku)
}

// An order the buyer was told yes, held at the gate for 10 minutes, meets
// a record that is unreachable for 20s: handoff's doc promises it is
// retried "for as long as the message's Deadline has not passed (the gate
// still holds the order), so an outage shorter than the hold loses no
// order". When the Recorder's one read of the hold time failed, it
// publishes the message with no Deadline, and the Consumer dead-letters
// it at attempt MaxAttempts (about 16s of default backoff) while the gate
// still holds it for minutes: the order is never recorded, and the gate's
// reclaimer returns it later although the buyer was told yes.
func TestZZOrderWithAnUnreadHoldSurvivesAnOutageShorterThanItsHold(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(t0)
	q := handofftest.NewMemory(time.Hour)
	gate := memstock.New(clock)
	record := &outageRecord{Store: memstock.New(clock), clock: clock, back: t0.Add(20 * time.Second)}
	rec := handoff.NewRecorder(q, &zzBlinkingLevels{Store: gate}, handoff.RecorderConfig{Clock: clock})
	flow := tiered.New(gate, record, tiered.Config{Recorder: rec, Clock: clock, RecheckAfter: -1})
	if err := flow.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	p, err := flow.Place(ctx, order("o1", 1))
	if err != nil || p != tiered.Pending {
		t.Fatalf("Place = %v, %v; want Pending (told yes)", p, err)
	}
	ds := fetch(t, q.Source(), 1)
	m := ds[0].Message()
	var dead error
	c, err := handoff.NewConsumer(q.Source(), flow, handoff.ConsumerConfig{Clock: clock,
		Done: func(_ context.Context, _ handoff.Message, err error) { dead = err }})
	if err != nil {
		t.Fatal(err)
	}
	var last *stepDelivery
	for attempt := 1; attempt <= 100; attempt++ {
		last = &stepDelivery{m: m, attempt: attempt}
		c.Settle(ctx, []handoff.Delivery{last})
		if last.ended != "retried" {
			break
		}
		clock.Advance(last.retry)
	}
	in, _ := record.Orders(ctx, []string{"o1"})
	recorded := len(in) == 1 && in[0].State == stock.StateHeld
	held, _ := gate.Orders(ctx, []string{"o1"})
	gateHolds := len(held) == 1 && held[0].State == stock.StateHeld
	if last.ended != "acked" || !recorded {
		t.Fatalf("after a 20s record outage (deadline %v, gate still holds it: %v, %v after the order): delivery %d %s (%v), recorded: %v; want it retried until the record is back, then recorded and acked",
			m.Deadline, gateHolds, clock.Now().Sub(t0), last.attempt, last.ended, dead, recorded)
	}
}
