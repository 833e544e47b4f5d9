package tiered_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// HoldReader's promise: the zero time when the gate does not hold the
// order (the hold ended). A hold whose deadline has passed has ended
// (Settle answers it ErrHoldExpired), reclaimed or not.
func TestHeldUntilOfALapsedHoldIsZero(t *testing.T) {
	for _, p := range readerPairs() {
		t.Run(p.redis+"+"+p.db, func(t *testing.T) {
			ctx := context.Background()
			t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
			clock := stocktest.NewClock(t0)
			_, gate, record := readerShop(t, p, clock)
			rec := &deadlineRecorder{}
			flow := tiered.New(gate, record, tiered.Config{Clock: clock, Recorder: rec})
			sku := testdb.Unique("sku")
			if err := flow.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 5, HoldTTL: 10 * time.Minute, MaxHoldTTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			o := stock.Order{ID: testdb.Unique("o"), Items: []stock.Item{{SKU: sku, Qty: 1}}}
			if _, err := flow.Place(ctx, o); err != nil {
				t.Fatal(err)
			}
			until, err := flow.HeldUntil(ctx, o.ID)
			t.Logf("HeldUntil before = %v, %v", until, err)
			clock.Advance(11 * time.Minute)
			until, err = flow.HeldUntil(ctx, o.ID)
			t.Logf("HeldUntil lapsed = %v, %v", until, err)
			serr := flow.Settle(ctx, o)
			t.Logf("Settle = %v", serr)
			if !until.IsZero() {
				t.Errorf("HeldUntil of a hold past its deadline = %v; want the zero time (the hold ended: Settle answers %v)", until, serr)
			}
		})
	}
}
