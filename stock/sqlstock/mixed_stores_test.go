package sqlstock_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// Three Stores, one per strategy, share one pair of tables and sell two-line
// orders at once: exactly the units of the scarce SKU are sold, and the
// per-user limit of the other holds across Stores.
func TestStoresOfEveryStrategyShareTables(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			ctx := context.Background()
			db := b.open(t)
			table, ledger := testdb.Unique("zzs"), testdb.Unique("zzl")
			var stores []*sqlstock.Store
			for i, st := range strategies {
				cfg := sqlstock.Config{Strategy: st, Dialect: b.dialect, Table: table, Ledger: ledger, MaxAttempts: 100_000}
				if i == 0 {
					stores = append(stores, newStore(t, db, cfg))
					continue
				}
				s, err := sqlstock.New(db.DB, cfg)
				if err != nil {
					t.Fatal(err)
				}
				stores = append(stores, s)
			}
			if err := stores[0].PutOnSale(ctx, stock.Listing{SKU: "X", Units: 50}); err != nil {
				t.Fatal(err)
			}
			if err := stores[0].PutOnSale(ctx, stock.Listing{SKU: "Y", Units: 1000, PerUserLimit: 2}); err != nil {
				t.Fatal(err)
			}
			const users, each = 30, 3
			ok := buyAtOnce(t, users*each, func(i int) error {
				return stores[i%3].Deduct(ctx, stock.Order{ID: fmt.Sprint("o", i), UserID: fmt.Sprint("u", i%users),
					Items: []stock.Item{{SKU: "X", Qty: 1}, {SKU: "Y", Qty: 1}}})
			})
			x, _ := stores[1].Levels(ctx, "X")
			y, _ := stores[2].Levels(ctx, "Y")
			if ok != 50 || x.Available != 0 || x.Held != 50 || y.Held != 50 {
				t.Errorf("%d took; X %+v Y %+v", ok, x, y)
			}
			for u := range users {
				if n, _ := stores[0].UserUnits(ctx, "Y", fmt.Sprint("u", u)); n > 2 {
					t.Errorf("u%d holds %d of Y, limit 2", u, n)
				}
			}
		})
	}
}
