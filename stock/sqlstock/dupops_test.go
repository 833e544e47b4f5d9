package sqlstock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// The same Restock, RevertItems, Revert and Deduct sent by 16 callers at
// once applies exactly once, and every caller gets nil.
func TestConcurrentRepeatsApplyOnce(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		ctx := context.Background()
		s := newStore(t, b.open(t), sqlstock.Config{Strategy: st, Dialect: b.dialect, MaxAttempts: 100_000})
		if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 100}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := s.Deduct(ctx, stock.Order{ID: fmt.Sprint("o", i), Items: []stock.Item{{SKU: "a", Qty: 5}}}); err != nil {
				t.Fatal(err)
			}
		}
		const n = 16
		var wg sync.WaitGroup
		errs := make(chan error, 5*n)
		for range n {
			wg.Add(5)
			go func() { defer wg.Done(); errs <- s.Restock(ctx, stock.Restock{OpID: "k", SKU: "a", Units: 7}) }()
			go func() {
				defer wg.Done()
				errs <- s.RevertItems(ctx, stock.Return{OpID: "r", OrderID: "o0", Items: []stock.Item{{SKU: "a", Qty: 2}}})
			}()
			go func() { defer wg.Done(); errs <- s.Revert(ctx, "o1") }()
			go func() {
				defer wg.Done()
				errs <- s.Deduct(ctx, stock.Order{ID: "o3", Items: []stock.Item{{SKU: "a", Qty: 4}}})
			}()
			go func() {
				defer wg.Done()
				// o2: a RevertItems of all of it and a Revert at once.
				err := s.RevertItems(ctx, stock.Return{OpID: "all", OrderID: "o2", Items: []stock.Item{{SKU: "a", Qty: 5}}})
				if errors.Is(err, stock.ErrOrderClosed) {
					err = nil
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("repeat: %v", err)
			}
		}
		// 100 + 7 restocked - o0 (5-2) - o3 4 = 100
		lv, _ := s.Levels(ctx, "a")
		if lv.Available != 100 || lv.Held != 7 || lv.Sold != 0 {
			t.Errorf("levels %+v, want 100 available, 7 held", lv)
		}
	})
}
