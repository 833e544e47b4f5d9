package sqlstock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A caller's open transaction that works on one order (here
// TxStore.ExtendHold: the reclaimer cannot return the order either way
// until it ends) keeps the reclaimer from that order only: the other due
// holds, of other SKUs, go back.
func TestReclaimSkipsAnOrderAnotherTransactionHolds(t *testing.T) {
	for _, b := range backends() {
		if b.dialect == sqlstock.SQLite {
			continue // one writer: a caller's write transaction holds the database
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			ctx := context.Background()
			clock := stocktest.NewClock(time.Unix(1_800_000_000, 0))
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, LockWait: time.Second, Clock: clock})
			for _, sku := range []string{"a", "b", "c"} {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			for id, sku := range map[string]string{"o1": "a", "o2": "b", "o3": "c"} {
				if err := s.Deduct(ctx, stock.Order{ID: id, Items: []stock.Item{{SKU: sku, Qty: 1}}}); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if err := s.InTx(tx).ExtendHold(ctx, "o2", clock.Now().Add(30*time.Minute)); err != nil {
				t.Fatal(err)
			}
			clock.Advance(2 * time.Minute) // o1, o3 (and o2 as committed) are due
			got := map[string]bool{}
			var last error
			for range 2 {
				out, err := s.ReclaimExpired(ctx, 100)
				last = err
				for _, r := range out {
					got[r.OrderID] = true
				}
			}
			if !got["o1"] || !got["o3"] {
				t.Errorf("while a caller's transaction holds o2's lines, two reclaim passes returned %v (last error: %v); want o1 and o3 back", got, last)
			}
			for _, sku := range []string{"a", "c"} {
				if lv, _ := s.Levels(ctx, sku); lv.Held != 0 {
					t.Errorf("%s: %d units still held past their deadline", sku, lv.Held)
				}
			}
		})
	}
}

// The same with the stock row: a caller's open transaction that took units
// of SKU b (TxStore.Deduct) keeps the reclaimer from b's due hold only:
// the due holds of a and c, whose rows nobody holds, go back.
func TestReclaimSkipsAStockRowAnotherTransactionHolds(t *testing.T) {
	for _, b := range backends() {
		if b.dialect == sqlstock.SQLite {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			ctx := context.Background()
			clock := stocktest.NewClock(time.Unix(1_800_000_000, 0))
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, LockWait: time.Second, Clock: clock})
			for _, sku := range []string{"a", "b", "c"} {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			for id, sku := range map[string]string{"o1": "a", "o2": "b", "o3": "c"} {
				if err := s.Deduct(ctx, stock.Order{ID: id, Items: []stock.Item{{SKU: sku, Qty: 1}}}); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(2 * time.Minute) // o1, o2, o3 are due
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if err := s.InTx(tx).Deduct(ctx, stock.Order{ID: "n", Items: []stock.Item{{SKU: "b", Qty: 1}}}); err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			var last error
			for range 2 {
				out, err := s.ReclaimExpired(ctx, 100)
				last = err
				for _, r := range out {
					got[r.OrderID] = true
				}
			}
			if !got["o1"] || !got["o3"] {
				t.Errorf("while a caller's transaction holds b's row, two reclaim passes returned %v (last error: %v); want o1 and o3 back", got, last)
			}
		})
	}
}
