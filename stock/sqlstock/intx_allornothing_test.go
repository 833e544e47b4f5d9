package sqlstock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// In a caller's transaction: a two-line order refused on its second line
// leaves nothing of its first; the same ID then takes once, a repeat in
// the same transaction takes nothing more, Confirm and a partial return
// of it work before COMMIT, and the commit carries exactly that.
func TestInTxAllOrNothing(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		ctx := context.Background()
		db := b.open(t)
		s := newStore(t, db, sqlstock.Config{Strategy: st, Dialect: b.dialect})
		for _, l := range []stock.Listing{{SKU: "a", Units: 10}, {SKU: "b", Units: 1}} {
			if err := s.PutOnSale(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if b.dialect == sqlstock.SQLite {
			// start with a write, as TxStore's doc asks
			if _, err := tx.ExecContext(ctx, "CREATE TEMP TABLE IF NOT EXISTS intx_w (x INTEGER)"); err != nil {
				t.Fatal(err)
			}
		}
		ts := s.InTx(tx)
		two := stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 3}, {SKU: "b", Qty: 2}}}
		if err := ts.Deduct(ctx, two); !errors.Is(err, stock.ErrSoldOut) {
			t.Fatalf("two-line order past b's stock: %v, want sold out", err)
		}
		one := stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 3}, {SKU: "b", Qty: 1}}}
		if err := ts.Deduct(ctx, one); err != nil {
			t.Fatalf("same ID, fitting items: %v", err)
		}
		if err := ts.Deduct(ctx, one); err != nil {
			t.Fatalf("repeat in the same transaction: %v", err)
		}
		if err := ts.RevertItems(ctx, stock.Return{OpID: "r", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
			t.Fatalf("partial return: %v", err)
		}
		if err := ts.Confirm(ctx, "o1"); err != nil {
			t.Fatalf("confirm: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		a, _ := s.Levels(ctx, "a")
		bl, _ := s.Levels(ctx, "b")
		if a.Available != 8 || a.Held != 0 || a.Sold != 2 || bl.Available != 0 || bl.Sold != 1 {
			t.Errorf("after commit: a %+v, b %+v; want a 8/0/2, b 0/0/1", a, bl)
		}
		if err := s.Deduct(ctx, one); err != nil {
			t.Errorf("Deduct of the committed order again: %v, want nil", err)
		}
		if a2, _ := s.Levels(ctx, "a"); a2.Available != 8 {
			t.Errorf("repeat took again: %+v", a2)
		}
	})
}
