package sqlstock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Reclaimers on several nodes at once, each pass over many due orders:
// every order comes back exactly once, and no pass fails (a pass waits
// for the rows another pass holds, within LockWait).
func TestConcurrentBigReclaimPasses(t *testing.T) {
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
			const skus, n = 8, 400
			for i := range skus {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: fmt.Sprintf("s%d", i), Units: 1000, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n {
				if err := s.Deduct(ctx, stock.Order{ID: fmt.Sprintf("d%03d", i), Items: []stock.Item{{SKU: fmt.Sprintf("s%d", i%skus), Qty: 1}}}); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(2 * time.Minute)
			var (
				mu   sync.Mutex
				seen = map[string]int{}
				errs []error
				wg   sync.WaitGroup
			)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 6 {
						out, err := s.ReclaimExpired(ctx, 150)
						mu.Lock()
						if err != nil {
							errs = append(errs, err)
						}
						for _, r := range out {
							seen[r.OrderID]++
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			for _, err := range errs {
				t.Errorf("pass: %v", err)
			}
			for id, c := range seen {
				if c != 1 {
					t.Errorf("%s returned %d times", id, c)
				}
			}
			if len(seen) != n {
				t.Errorf("%d of %d orders returned", len(seen), n)
			}
		})
	}
}
