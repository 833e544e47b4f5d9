package sqlstock_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// Orders of 2500 IDs (unknown ones, repeats, across statement batches)
// answers each in input order; Snapshot likewise for 2100 SKUs.
func TestOrdersAndSnapshotManyIDs(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		if st != sqlstock.Atomic {
			t.Skip("reads do not depend on the strategy")
		}
		ctx := context.Background()
		s := newStore(t, b.open(t), sqlstock.Config{Strategy: st, Dialect: b.dialect})
		if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 100}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := s.Deduct(ctx, stock.Order{ID: fmt.Sprint("k", i), Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
				t.Fatal(err)
			}
		}
		var ids []string
		for i := range 2500 {
			ids = append(ids, fmt.Sprint("k", i%1200))
		}
		in, err := s.Orders(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range in {
			want := stock.StateUnknown
			if i%1200 < 3 {
				want = stock.StateHeld
			}
			if o.ID != ids[i] || o.State != want {
				t.Fatalf("Orders[%d] = %s %v, want %s %v", i, o.ID, o.State, ids[i], want)
			}
		}
		var skus []string
		for i := range 2100 {
			skus = append(skus, fmt.Sprint("s", i%1100))
		}
		skus[2050] = "a"
		lv, err := s.Snapshot(ctx, skus)
		if err != nil {
			t.Fatal(err)
		}
		if len(lv) != len(skus) {
			t.Fatalf("Snapshot returned %d, want %d", len(lv), len(skus))
		}
		t.Logf("Snapshot[2050] = %+v", lv[2050])
	})
}
