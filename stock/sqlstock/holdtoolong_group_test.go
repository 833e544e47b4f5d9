package sqlstock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// Concurrent buyers of a hot SKU, every third asking a hold past the
// SKU's maximum: those are refused (hold too long, or sold out) with
// nothing written, and exactly the units go to the others.
func TestHoldTooLongInGroups(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		ctx := context.Background()
		s := newStore(t, b.open(t), sqlstock.Config{Strategy: st, Dialect: b.dialect, MaxAttempts: 100_000})
		if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 20, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		const buyers = 60
		errs := make([]error, buyers)
		var wg sync.WaitGroup
		for i := range buyers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := stock.Order{ID: fmt.Sprint("o", i), Items: []stock.Item{{SKU: "a", Qty: 1}}}
				if i%3 == 0 {
					o.HoldTTL = 2 * time.Hour
				}
				errs[i] = s.Deduct(ctx, o)
			}()
		}
		wg.Wait()
		ok := 0
		for i, err := range errs {
			switch {
			case err == nil && i%3 == 0:
				t.Errorf("o%d asked a 2h hold past the 1h maximum and got it", i)
			case err == nil:
				ok++
			case errors.Is(err, stock.ErrSoldOut), i%3 == 0 && errors.Is(err, stock.ErrHoldTooLong):
			default:
				t.Errorf("o%d: %v", i, err)
			}
		}
		lv, _ := s.Levels(ctx, "a")
		if ok != 20 || lv.Available != 0 || lv.Held != 20 {
			t.Errorf("%d took; levels %+v; want 20, 0 available, 20 held", ok, lv)
		}
	})
}
