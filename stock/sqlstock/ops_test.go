package sqlstock_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Every applied restock leaves one row in the operations table, which a
// View lists by SKU and time; repeats and refused restocks leave none.
func TestViewRestocksListsAppliedOps(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			clock := stocktest.NewClock(stocktest.Epoch)
			s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect, Clock: clock})
			ctx := t.Context()
			for _, sku := range []string{"a", "b", "c"} {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10}); err != nil {
					t.Fatal(err)
				}
			}
			ms := func(d time.Duration) int64 { return stocktest.Epoch.Add(d).UnixMilli() }
			apply := func(r stock.Restock, want error) {
				t.Helper()
				if err := s.Restock(ctx, r); !errors.Is(err, want) || (want == nil && err != nil) {
					t.Fatalf("Restock(%+v): %v, want %v", r, err, want)
				}
			}
			apply(stock.Restock{OpID: "old", SKU: "a", Units: 1}, nil)
			clock.Advance(time.Second)
			apply(stock.Restock{OpID: "r2", SKU: "b", Units: 2}, nil)
			apply(stock.Restock{OpID: "r1", SKU: "a", Units: 3}, nil)
			apply(stock.Restock{OpID: "r1", SKU: "a", Units: 3}, nil)
			apply(stock.Restock{OpID: "r1", SKU: "a", Units: 4}, stock.ErrConflict)
			apply(stock.Restock{OpID: "gone", SKU: "nope", Units: 1}, stock.ErrUnknownSKU)
			apply(stock.Restock{OpID: "big", SKU: "a", Units: stock.MaxUnits}, stock.ErrInvalid)
			clock.Advance(time.Second)
			apply(stock.Restock{OpID: "r3", SKU: "c", Units: 5}, nil)
			apply(stock.Restock{OpID: "r4", SKU: "a", Units: 6}, nil)

			v, err := s.View(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			got, err := v.Restocks(ctx, []string{"a", "b"}, ms(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			want := []sqlstock.Op{
				{ID: "r1", SKU: "a", Units: 3, CreatedMs: ms(time.Second)},
				{ID: "r2", SKU: "b", Units: 2, CreatedMs: ms(time.Second)},
				{ID: "r4", SKU: "a", Units: 6, CreatedMs: ms(2 * time.Second)},
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Restocks = %+v\nwant %+v", got, want)
			}
			if lv, _ := s.Levels(ctx, "a"); lv.Available != 10+1+3+6 {
				t.Fatalf("a: %d available, want 20", lv.Available)
			}
			// A refused restock left no row: its ID is free.
			apply(stock.Restock{OpID: "big", SKU: "a", Units: 1}, nil)
		})
	}
}
