package sqlstock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// At the deadline's exact millisecond, and one before, every call agrees on
// whether a hold has expired, and units come back exactly once.
func TestDeadlineEdgeAgrees(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		for _, at := range []time.Duration{-time.Millisecond, 0, time.Millisecond} {
			ctx := context.Background()
			clock := stocktest.NewClock(time.Unix(1_800_000_000, 0))
			s := newStore(t, b.open(t), sqlstock.Config{Strategy: st, Dialect: b.dialect, Clock: clock})
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			ids := []string{"c", "r", "x", "e", "d", "p"}
			for _, id := range ids {
				if err := s.Deduct(ctx, stock.Order{ID: id, UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(time.Minute + at)
			expired := at >= 0
			rec, err := s.ReclaimExpired(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			if expired != (len(rec) == len(ids)) || (!expired && len(rec) != 0) {
				t.Errorf("at deadline%+v: reclaimed %d of %d", at, len(rec), len(ids))
			}
			cErr := s.Confirm(ctx, "c")
			dErr := s.Deduct(ctx, stock.Order{ID: "d", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 1}}})
			eErr := s.ExtendHold(ctx, "e", clock.Now().Add(time.Minute))
			pErr := s.RevertItems(ctx, stock.Return{OpID: "p1", OrderID: "p", Items: []stock.Item{{SKU: "a", Qty: 1}}})
			rErr := s.Revert(ctx, "r")
			for name, err := range map[string]error{"Confirm": cErr, "Deduct again": dErr, "ExtendHold": eErr} {
				if expired != errors.Is(err, stock.ErrHoldExpired) || (!expired && err != nil) {
					t.Errorf("at deadline%+v: %s = %v", at, name, err)
				}
			}
			_ = pErr
			_ = rErr
			lv, _ := s.Levels(ctx, "a")
			want := stock.Levels{Available: 10, Held: 0, Sold: 0}
			if !expired {
				// c confirmed; r, p returned; d, e, x held.
				want = stock.Levels{Available: 6, Held: 3, Sold: 1}
			}
			if lv.Available != want.Available || lv.Held != want.Held || lv.Sold != want.Sold {
				t.Errorf("at deadline%+v: levels %+v, want %d/%d/%d", at, lv, want.Available, want.Held, want.Sold)
			}
		}
	})
}
