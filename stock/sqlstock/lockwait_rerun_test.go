package sqlstock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A Deduct of {r0, r1} while a writer holds r1 for one and a half
// LockWaits: the first attempt's wait ends with nothing applied, and the
// call runs again within its two LockWaits, so it takes its units once the
// writer commits. Its wait for r1 holding nothing (after the short wait
// while it held r0) ends at the first attempt's bound as a lock wait does,
// never as the end of the call.
func TestDeductOfARowHeldPastOneLockWaitRunsAgain(t *testing.T) {
	testdb.Need(t, testdb.Postgres)
	db := testdb.PostgreSQL(t, 8)
	ctx := t.Context()
	const lockWait = time.Second
	for _, st := range []sqlstock.Strategy{sqlstock.Atomic, sqlstock.Optimistic, sqlstock.Pessimistic} {
		t.Run(st.String(), func(t *testing.T) {
			table := testdb.Unique("sgs")
			s := newStore(t, db, sqlstock.Config{Dialect: sqlstock.Postgres, Table: table, Strategy: st, LockWait: lockWait})
			for _, sku := range []string{"r0", "r1"} {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 100, HoldTTL: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			update := "UPDATE " + quote(sqlstock.Postgres, table) + " SET available = available WHERE sku = $1"
			for i := range 2 {
				w, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = w.Rollback() }()
				if _, err := w.ExecContext(ctx, update, "r1"); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() {
					done <- s.Deduct(context.WithoutCancel(ctx), stock.Order{ID: "o" + string(rune('a'+i)), UserID: "u1",
						Items: []stock.Item{{SKU: "r0", Qty: 1}, {SKU: "r1", Qty: 2}}})
				}()
				time.Sleep(lockWait * 3 / 2)
				select {
				case err := <-done:
					t.Fatalf("order %d: Deduct answered %v while the writer held r1", i, err)
				default:
				}
				if err := w.Commit(); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatalf("order %d: Deduct: %v", i, err)
				}
			}
			for sku, want := range map[string]int64{"r0": 2, "r1": 4} {
				lv, err := s.Levels(ctx, sku)
				if err != nil {
					t.Fatal(err)
				}
				if lv.Held != want || lv.Available != 100-want {
					t.Errorf("%s: %+v, want %d held", sku, lv, want)
				}
			}
		})
	}
}

// Writers that each hold r1 20ms, one after another, keep it held with
// others queued for it. A Deduct of {r0, r1} that queues for r1 gets its
// turn after the few queued before it, long before its LockWait: it must
// not give up its place, wait for the holder, and queue again at the end,
// over and over until its calls' time is spent.
func TestDeductOfARowInAQueueOfWritersGetsItsTurn(t *testing.T) {
	testdb.Need(t, testdb.Postgres)
	db := testdb.PostgreSQL(t, 16)
	ctx := t.Context()
	const (
		writers = 4
		hold    = 20 * time.Millisecond
	)
	for _, st := range []sqlstock.Strategy{sqlstock.Atomic, sqlstock.Optimistic, sqlstock.Pessimistic} {
		t.Run(st.String(), func(t *testing.T) {
			table := testdb.Unique("sgs")
			s := newStore(t, db, sqlstock.Config{Dialect: sqlstock.Postgres, Table: table, Strategy: st, LockWait: time.Second})
			for _, sku := range []string{"r0", "r1"} {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 100, HoldTTL: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			update := "UPDATE " + quote(sqlstock.Postgres, table) + " SET available = available WHERE sku = 'r1'"
			stop := make(chan struct{})
			var wg sync.WaitGroup
			defer wg.Wait()
			defer close(stop)
			for range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						tx, err := db.BeginTx(ctx, nil)
						if err != nil {
							t.Error(err)
							return
						}
						_, err = tx.ExecContext(ctx, update)
						if err == nil {
							_, err = tx.ExecContext(ctx, "SELECT pg_sleep($1)", hold.Seconds())
						}
						if err == nil {
							err = tx.Commit()
						}
						if err != nil {
							_ = tx.Rollback()
							t.Error(err)
							return
						}
					}
				}()
			}
			for i := range 3 {
				err := s.Deduct(ctx, stock.Order{ID: "o" + string(rune('a'+i)), UserID: "u1",
					Items: []stock.Item{{SKU: "r0", Qty: 1}, {SKU: "r1", Qty: 2}}})
				if err != nil {
					t.Errorf("order %d: Deduct: %v", i, err)
				}
			}
		})
	}
}
