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
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Two reclaimers, a Revert and a Confirm of every due order, all at once:
// every order ends expired, each is reported by at most one reclaim pass,
// every unit comes back exactly once, nothing is sold, and no call fails.
func TestReclaimRacesRevertAndConfirmPastDeadline(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			ctx := context.Background()
			clock := stocktest.NewClock(time.Unix(1_800_000_000, 0))
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, LockWait: 2 * time.Second, Clock: clock})
			skus := []string{"a", "b", "c"}
			const units = 1000
			for _, sku := range skus {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: units, PerUserLimit: 100, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			const n = 40
			ids := make([]string, n)
			for i := range n {
				ids[i] = fmt.Sprintf("o%02d", i)
				items := []stock.Item{{SKU: skus[i%3], Qty: int64(1 + i%4)}}
				if i%2 == 0 {
					items = append(items, stock.Item{SKU: skus[(i+1)%3], Qty: 2})
				}
				if err := s.Deduct(ctx, stock.Order{ID: ids[i], UserID: fmt.Sprintf("u%d", i%5), Items: items}); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(2 * time.Minute)
			var (
				mu       sync.Mutex
				reported = map[string]int{}
				failures []string
				wg       sync.WaitGroup
			)
			fail := func(f string, a ...any) {
				mu.Lock()
				failures = append(failures, fmt.Sprintf(f, a...))
				mu.Unlock()
			}
			for r := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 15 {
						out, err := s.ReclaimExpired(ctx, 7)
						if err != nil {
							fail("reclaimer %d: %v", r, err)
						}
						mu.Lock()
						seen := map[string]bool{}
						for _, l := range out {
							if !seen[l.OrderID] {
								seen[l.OrderID] = true
								reported[l.OrderID]++
							}
						}
						mu.Unlock()
					}
				}()
			}
			for _, id := range ids {
				wg.Add(2)
				go func() {
					defer wg.Done()
					if err := s.Revert(ctx, id); err != nil {
						fail("Revert(%s): %v", id, err)
					}
				}()
				go func() {
					defer wg.Done()
					if err := s.Confirm(ctx, id); !errors.Is(err, stock.ErrHoldExpired) {
						fail("Confirm(%s) past its deadline: %v; want ErrHoldExpired", id, err)
					}
				}()
			}
			wg.Wait()
			if _, err := s.ReclaimExpired(ctx, 100); err != nil {
				t.Errorf("last pass: %v", err)
			}
			for _, f := range failures {
				t.Error(f)
			}
			for id, c := range reported {
				if c > 1 {
					t.Errorf("%s reported by %d passes", id, c)
				}
			}
			infos, err := s.Orders(ctx, ids)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range infos {
				if o.State != stock.StateExpired {
					t.Errorf("%s ends %v; want expired", o.ID, o.State)
				}
			}
			for _, sku := range skus {
				lv, err := s.Levels(ctx, sku)
				if err != nil || lv.Available != units || lv.Held != 0 || lv.Sold != 0 {
					t.Errorf("%s: %+v, %v; want all %d units back, none held or sold", sku, lv, err, units)
				}
			}
		})
	}
}
