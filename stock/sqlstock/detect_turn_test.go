package sqlstock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A Store's first calls, before it has read its SKU column's collation:
// a call on the pool (Snapshot, whose reads wait as long as the caller's
// context) waits for a connection, which the caller's transaction holds;
// the caller's TxStore.Deduct on that transaction reads the collation on
// the transaction itself so as never to wait for the pool, and must not
// wait for the pool call either: it answers at once.
func TestFirstTxStoreCallDoesNotWaitForAPoolCallWaitingForItsConnection(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			ctx := context.Background()
			setup := newStore(t, db, sqlstock.Config{Dialect: b.dialect, LockWait: time.Second})
			if err := setup.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
				t.Fatal(err)
			}
			tables := setup.Tables()
			s, err := sqlstock.New(db.DB, sqlstock.Config{Dialect: b.dialect, LockWait: time.Second, Table: tables[0], Ledger: tables[1]})
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			snapCtx, stopSnap := context.WithCancel(ctx)
			defer stopSnap()
			snapDone := make(chan error, 1)
			go func() {
				_, err := s.Snapshot(snapCtx, []string{"a"})
				snapDone <- err
			}()
			for db.Stats().WaitCount == 0 { // the Snapshot waits for the connection tx holds
				select {
				case err := <-snapDone:
					t.Fatalf("Snapshot ended before waiting for a connection: %v", err)
				case <-time.After(5 * time.Millisecond):
				}
			}
			callCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			err = s.InTx(tx).Deduct(callCtx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
			if err != nil {
				t.Errorf("TxStore.Deduct on the transaction holding the pool's only connection, a Snapshot waiting for it: %v; want nil", err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Logf("the TxStore call waited its whole context")
			}
			_ = tx.Rollback()
			stopSnap()
			<-snapDone
		})
	}
}
