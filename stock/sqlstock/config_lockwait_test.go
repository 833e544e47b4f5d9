package sqlstock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// New refuses a LockWait past what every server takes (2147483647ms,
// PostgreSQL's largest lock_timeout and SQLite's largest busy_timeout)
// with an error wrapping stock.ErrInvalid, before it touches the
// database, and a Store with the longest LockWait it accepts runs its
// transactions.
func TestLockWaitPastTheServersRangeIsRefusedByNew(t *testing.T) {
	const longest = (1<<31 - 1) * time.Millisecond
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			ctx := context.Background()
			for _, wait := range []time.Duration{longest + time.Millisecond, 25 * 24 * time.Hour} {
				cfg := sqlstock.Config{Dialect: b.dialect, LockWait: wait}
				if _, err := sqlstock.New(db.DB, cfg); !errors.Is(err, stock.ErrInvalid) {
					t.Fatalf("New with LockWait %v = %v; want an error wrapping stock.ErrInvalid", wait, err)
				}
			}
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, LockWait: longest})
			for _, sku := range []string{"a", "b"} {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}}); err != nil {
				t.Errorf("New accepted LockWait %v, then Deduct failed with %v", longest, err)
			}
		})
	}
}
