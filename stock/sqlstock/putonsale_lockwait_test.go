package sqlstock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// PutOnSale of a SKU whose row another transaction holds waits for the
// row lock at most Config.LockWait per attempt, on every server, and a
// lock wait that ran out is stock.ErrContention (nothing applied) within
// two LockWaits, never stock.ErrUnknownOutcome.
func TestPutOnSaleOfAHeldRowIsBoundedByLockWait(t *testing.T) {
	for _, b := range backends() {
		if b.dialect == sqlstock.SQLite {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			ctx := context.Background()
			const lockWait = time.Second
			table := testdb.Unique("sgs")
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Table: table, LockWait: lockWait})
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
				t.Fatal(err)
			}
			w, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = w.Rollback() }()
			update := "UPDATE " + quote(b.dialect, table) + " SET available = available WHERE sku = ?"
			if b.dialect == sqlstock.Postgres {
				update = "UPDATE " + quote(b.dialect, table) + " SET available = available WHERE sku = $1"
			}
			if _, err := w.ExecContext(ctx, update, "a"); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 20})
			took := time.Since(start)
			t.Logf("PutOnSale of a held row: %v after %v", err, took.Round(time.Millisecond))
			if !errors.Is(err, stock.ErrContention) {
				t.Errorf("PutOnSale of a held row answered %v; want stock.ErrContention", err)
			}
			if errors.Is(err, stock.ErrUnknownOutcome) {
				t.Errorf("PutOnSale that only waited for a row lock answered stock.ErrUnknownOutcome (%v); want stock.ErrContention", err)
			}
			if took > 2*lockWait+300*time.Millisecond {
				t.Errorf("PutOnSale waited %v for a row lock; LockWait is %v (a call that applied nothing answers within two)", took.Round(time.Millisecond), lockWait)
			}
		})
	}
}
