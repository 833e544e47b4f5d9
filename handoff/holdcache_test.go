package handoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/stock"
)

// The Recorder reuses a SKU's hold time for HoldCache on its Clock, as it
// tells every other time: once the Clock has moved past HoldCache after a
// relist, a message carries the new hold time, as the gate's hold does.
// The cache was timed by the wall clock, so on a Clock that runs apart
// from it the message kept the old hold time.
func TestRecorderHoldCacheRunsOnItsClock(t *testing.T) {
	ctx := context.Background()
	s := newShop(t, 90*time.Second, handoff.RecorderConfig{HoldCache: time.Minute})
	if _, err := s.flow.Place(ctx, order("o1", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.flow.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(2 * time.Minute)
	if _, err := s.flow.Place(ctx, order("o2", 1)); err != nil {
		t.Fatal(err)
	}
	ds := fetch(t, s.q.Source(), 2)
	if len(ds) != 2 {
		t.Fatalf("%d messages, want 2", len(ds))
	}
	m := ds[1].Message()
	if want := s.clock.Now().Add(30 * time.Second); m.Order.ID != "o2" || !m.Deadline.Equal(want) {
		t.Fatalf("%s: deadline %v, want %v (the listing's new hold time)", m.Order.ID, m.Deadline, want)
	}
}
