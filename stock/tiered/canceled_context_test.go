package tiered_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// "An error from before any request that could write was sent (... a
// context already over ...) is returned as it is: nothing was applied,
// and a context error matches the context's", on every composition: the
// flow's RevertItems, ExtendHold and ReclaimExpired with a context already
// cancelled answer context.Canceled, not stock.ErrUnknownOutcome, and
// write nothing. ReclaimExpired wrapped the gate's first answer in a
// *TierError, which says the call may have written.
func TestCanceledContextOnCompanionsWritesNothing(t *testing.T) {
	for _, p := range readerPairs() {
		t.Run(p.redis+"+"+p.db, func(t *testing.T) {
			ctx := t.Context()
			clock := stocktest.NewClock(stocktest.Epoch)
			m, _, _ := readerShop(t, p, clock)
			if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			for _, o := range []stock.Order{
				{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 3}}},
				{ID: "o2", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 1}}},
			} {
				if err := m.Deduct(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			dead, cancel := context.WithCancel(ctx)
			cancel()
			check := func(name string, err error) {
				t.Helper()
				if !errors.Is(err, context.Canceled) || errors.Is(err, stock.ErrUnknownOutcome) {
					t.Fatalf("%s with a canceled context: %v (unknown outcome: %v), want context.Canceled only", name, err, errors.Is(err, stock.ErrUnknownOutcome))
				}
			}
			check("RevertItems", m.RevertItems(dead, stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}))
			check("ExtendHold", m.ExtendHold(dead, "o1", clock.Now().Add(30*time.Minute)))
			clock.Advance(2 * time.Minute)
			_, err := m.ReclaimExpired(dead, 10)
			check("ReclaimExpired", err)
			lv, err := m.Levels(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if lv.Available != 6 || lv.Held != 4 || lv.Sold != 0 {
				t.Fatalf("available/held/sold = %d/%d/%d, want 6/4/0", lv.Available, lv.Held, lv.Sold)
			}
			if a, err := m.Available(ctx, "a"); err != nil || a != 6 {
				t.Fatalf("Available = %d, %v; want 6", a, err)
			}
			in, err := m.Orders(ctx, []string{"o1", "o2"})
			if err != nil {
				t.Fatal(err)
			}
			if in[0].State != stock.StateHeld || in[0].Returned != nil || !in[0].Deadline.Equal(stocktest.Epoch.Add(time.Minute)) || in[1].State != stock.StateHeld {
				t.Fatalf("Orders after canceled calls: %+v", in)
			}
		})
	}
}
