package sqlstock_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A return repeated in the caller's transaction after the same return
// (same OpID, same items) committed elsewhere is the same return: nil, or
// contention to run the transaction again, never a refusal. On MariaDB
// the caller's transaction may have read (its snapshot taken) before the
// other return committed.
func TestReviewInTxRepeatAfterSnapshotIsNotRefused(t *testing.T) {
	forEachServerTx(t, []sqlstock.Strategy{sqlstock.Atomic}, func(t *testing.T, b backend, st sqlstock.Strategy) {
		c := newCaller(t, b, b.open(t), sqlstock.Config{Strategy: st})
		ctx := t.Context()
		c.put(stock.Listing{SKU: "a", Units: 10})
		c.put(stock.Listing{SKU: "b", Units: 10})
		mustOK(t, "Deduct o1", c.s.Deduct(ctx, mkOrder("o1", "u1", mkItem("a", 2))))
		mustOK(t, "Deduct o2", c.s.Deduct(ctx, mkOrder("o2", "u1", mkItem("a", 2), mkItem("b", 1))))
		for _, tc := range []struct {
			name string
			r    stock.Return
		}{
			{"whole order", mkReturn("r1", "o1", mkItem("a", 2))},
			{"whole line", mkReturn("r1", "o2", mkItem("a", 2))},
		} {
			tx := c.begin(nil)
			_ = c.count(c.orders) // the caller reads first, outside tx
			var n int64
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+quote(c.d, c.orders)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			mustOK(t, "RevertItems "+tc.name, c.s.RevertItems(ctx, tc.r))
			err := c.s.InTx(tx).RevertItems(ctx, tc.r)
			if err != nil && !errors.Is(err, stock.ErrContention) {
				t.Errorf("%s: RevertItems repeated in a transaction that read before the first committed: %v, want nil or ErrContention", tc.name, err)
			}
			if err == nil {
				c.commit(tx)
			} else {
				_ = tx.Rollback()
			}
		}
		c.want("at the end", "a", 10, 0, 0)
		c.want("at the end", "b", 9, 1, 0)
	})
}

// CreateTables run at once by several Stores (of several processes, say)
// over the earlier version's tables upgrades them once, and every call
// succeeds.
func TestReviewConcurrentUpgrade(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			for round := range 4 {
				cfg := oldTables(t, db, b.dialect)
				cfg.Clock = stocktest.NewClock(stocktest.Epoch)
				const stores = 4
				var wg sync.WaitGroup
				errs := make([]error, stores)
				for i := range stores {
					wg.Add(1)
					go func() {
						defer wg.Done()
						s, err := sqlstock.New(db, cfg)
						if err == nil {
							err = s.CreateTables(t.Context())
						}
						errs[i] = err
					}()
				}
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Fatalf("round %d: CreateTables of store %d: %v", round, i, err)
					}
				}
				s, err := sqlstock.New(db, cfg)
				mustOK(t, "New", err)
				mustOK(t, "RevertItems after the upgrade", s.RevertItems(t.Context(), mkReturn("r1", "old1", mkItem("a", 1))))
				wantLevels(t, s, fmt.Sprintf("round %d", round), "a", 9, 1, 0)
			}
		})
	}
}
