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

// blinkingLevels is the gate as the Recorder reads it, whose first fails
// Levels reads fail (a Redis blip, a pool timeout) and the rest answer.
type blinkingLevels struct {
	*memstock.Store
	fails int64
	calls atomic.Int64
}

func (g *blinkingLevels) Levels(ctx context.Context, sku string) (stock.Levels, error) {
	if g.calls.Add(1) <= g.fails {
		return stock.Levels{}, errors.New("redis: i/o timeout")
	}
	return g.Store.Levels(ctx, sku)
}

// A gate whose hold time cannot be read twice in a row (an outage, not a
// blip) gets no message without a Deadline: Record publishes nothing and
// Place answers the order half-way (an unknown outcome: the buyer is not
// told yes), with the gate holding it. The buyer's retry with the same
// order hands it off once, with the gate's Deadline (counted from the
// first attempt, when the gate took the hold), and takes nothing
// more at the gate; the order is then recorded once.
func TestRecorderPublishesNothingForAHoldItCannotRead(t *testing.T) {
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
	if p, err := flow.Place(ctx, order("o1", 1)); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Place = %v, %v; want an unknown outcome (half-way), not told yes", p, err)
	}
	if n := levels.calls.Load(); n != 2 {
		t.Fatalf("%d reads of the hold time, want 2 (one more after the first failed)", n)
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("%d messages queued, want 0: a message without the gate's Deadline", n)
	}
	if lv, err := gate.Levels(ctx, "a"); err != nil || lv.Held != 1 || lv.Available != 9 {
		t.Fatalf("gate %+v, %v; want 1 held, 9 available (the hold awaits the retry or its deadline)", lv, err)
	}

	clock.Advance(time.Second)
	p, err := flow.Place(ctx, order("o1", 1))
	if err != nil || p != tiered.Pending {
		t.Fatalf("retried Place = %v, %v; want Pending", p, err)
	}
	if n := levels.calls.Load(); n != 2 {
		t.Fatalf("%d reads of the hold time, want 2 (the retry reads the gate's deadline of the order instead)", n)
	}
	if n := q.Len(); n != 1 {
		t.Fatalf("%d messages queued, want 1", n)
	}
	m := fetch(t, q.Source(), 8)[0].Message()
	if want := t0.Add(10 * time.Minute); !m.Deadline.Equal(want) || m.Order.ID != "o1" {
		t.Fatalf("message %s with deadline %v, want o1 with %v (the gate's: its hold began with the first attempt)", m.Order.ID, m.Deadline, want)
	}
	if lv, err := gate.Levels(ctx, "a"); err != nil || lv.Held != 1 || lv.Available != 9 {
		t.Fatalf("gate %+v, %v; want 1 held, 9 available (the retry took nothing more)", lv, err)
	}
	if err := flow.Settle(ctx, m.Order); err != nil {
		t.Fatal(err)
	}
	if lv, err := record.Levels(ctx, "a"); err != nil || lv.Held != 1 || lv.Available != 9 {
		t.Fatalf("record %+v, %v; want 1 held, 9 available", lv, err)
	}
}
