package sqlstock_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// 24 concurrent Deducts of one order ID with three different item sets
// (and users): exactly one set is taken, once; calls with that set get
// nil, the others stock.ErrConflict.
func TestSameIDDifferentItemsRace(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		ctx := context.Background()
		s := newStore(t, b.open(t), sqlstock.Config{Strategy: st, Dialect: b.dialect, MaxAttempts: 100_000})
		for _, sku := range []string{"a", "b"} {
			if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 100}); err != nil {
				t.Fatal(err)
			}
		}
		variants := []stock.Order{
			{ID: "o", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 1}}},
			{ID: "o", UserID: "u2", Items: []stock.Item{{SKU: "a", Qty: 1}}},
			{ID: "o", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 2}}},
		}
		const n = 24
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = s.Deduct(ctx, variants[i%3]) }()
		}
		wg.Wait()
		in, err := s.Orders(ctx, []string{"o"})
		if err != nil || len(in) != 1 || in[0].State != stock.StateHeld {
			t.Fatalf("Orders: %+v, %v", in, err)
		}
		won := -1
		for k, v := range variants {
			if v.UserID == in[0].UserID && len(v.Items) == len(in[0].Items) {
				won = k
			}
		}
		for i, err := range errs {
			if i%3 == won && err != nil || i%3 != won && !errors.Is(err, stock.ErrConflict) {
				t.Errorf("call %d (variant %d, winner %d): %v", i, i%3, won, err)
			}
		}
		a, _ := s.Levels(ctx, "a")
		bl, _ := s.Levels(ctx, "b")
		wantB := int64(100)
		if won == 2 {
			wantB = 98
		}
		if a.Available != 99 || bl.Available != wantB {
			t.Errorf("a %+v, b %+v; winner %d", a, bl, won)
		}
	})
}
