package tiered_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// deadlineRecorder is a DeadlineRecorder whose first fails Records fail
// (the hand-off could not take the order) and which notes the deadline
// each RecordUntil was given.
type deadlineRecorder struct {
	mu     sync.Mutex
	fails  int
	until  []time.Time
	record int
}

func (r *deadlineRecorder) Record(context.Context, stock.Order) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record++
	if r.record <= r.fails {
		return errors.New("broker: connection refused")
	}
	return nil
}

func (r *deadlineRecorder) RecordUntil(_ context.Context, _ stock.Order, deadline time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.until = append(r.until, deadline)
	return nil
}

// HeldUntil is the gate's deadline of a held order, extensions included
// (one extended while its hand-off is pending), and the zero time once
// the hold ended or for an order the gate does not know: the gate
// decides until when an order is held.
func TestHeldUntilIsTheGatesDeadline(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := stocktest.NewClock(t0)
	gate, record := memstock.New(clock), memstock.New(clock)
	flow := tiered.New(gate, record, tiered.Config{Recorder: &deadlineRecorder{}, Clock: clock})
	if err := flow.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: 10 * time.Minute, MaxHoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if p, err := flow.Place(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil || p != tiered.Pending {
		t.Fatalf("Place = %v, %v", p, err)
	}
	if until, err := flow.HeldUntil(ctx, "o1"); err != nil || !until.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("HeldUntil = %v, %v; want %v", until, err, t0.Add(10*time.Minute))
	}
	if err := flow.ExtendHold(ctx, "o1", t0.Add(40*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if until, err := flow.HeldUntil(ctx, "o1"); err != nil || !until.Equal(t0.Add(40*time.Minute)) {
		t.Fatalf("HeldUntil after ExtendHold = %v, %v; want %v", until, err, t0.Add(40*time.Minute))
	}
	if until, err := flow.HeldUntil(ctx, "o2"); err != nil || !until.IsZero() {
		t.Fatalf("HeldUntil of an unknown order = %v, %v; want the zero time", until, err)
	}
	if err := flow.Revert(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	if until, err := flow.HeldUntil(ctx, "o1"); err != nil || !until.IsZero() {
		t.Fatalf("HeldUntil of a reverted order = %v, %v; want the zero time", until, err)
	}
}

// The retry of an order Place answered half-way (the hand-off failed) is
// handed to a DeadlineRecorder with the gate's deadline of its hold,
// which began with the first attempt, not with the retry.
func TestHalfWayRetryIsHandedOffWithTheGatesDeadline(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := stocktest.NewClock(t0)
	rec := &deadlineRecorder{fails: 1}
	flow := tiered.New(memstock.New(clock), memstock.New(clock), tiered.Config{Recorder: rec, Clock: clock})
	if err := flow.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	o := stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	if _, err := flow.Place(ctx, o); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Place = %v; want half-way", err)
	}
	clock.Advance(8 * time.Minute)
	if p, err := flow.Place(ctx, o); err != nil || p != tiered.Pending {
		t.Fatalf("retry = %v, %v", p, err)
	}
	if len(rec.until) != 1 || !rec.until[0].Equal(t0.Add(10*time.Minute)) || rec.record != 1 {
		t.Fatalf("RecordUntil got %v (Records %d); want one with %v, the gate's deadline", rec.until, rec.record, t0.Add(10*time.Minute))
	}
}
