package sqlstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// PostgreSQL's one-statement deduct canceled at LockWait is answered at
// once as an unknown outcome, after one attempt: running it again would
// wait LockWait again, each time, past the bound the caller was given.
func TestPGOneStatementDeductWaitsLockWaitOnce(t *testing.T) {
	for _, b := range backends() {
		if b.dialect != sqlstock.Postgres {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			table := testdb.Unique("sgs")
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Table: table, LockWait: 200 * time.Millisecond, MaxGroup: 1})
			ctx := t.Context()
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
				t.Fatal(err)
			}
			holdLock(t, db, b.dialect, table)
			err := s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
			var ue *sqlstock.UnknownOutcomeError
			if !errors.As(err, &ue) || ue.Attempts != 1 {
				t.Fatalf("Deduct under a held row lock: %v; want an unknown outcome after 1 attempt", err)
			}
		})
	}
}

// PostgreSQL sets the transaction's lock_timeout before anything else: a
// connection lost on that statement has written nothing, so the answer is
// never an unknown outcome (ReclaimExpired, which is not run again, used
// to answer one).
func TestPGLockTimeoutSettingLostIsNotAnUnknownOutcome(t *testing.T) {
	for _, b := range backends() {
		if b.dialect != sqlstock.Postgres {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db, f := openFlaky(t, b)
			clock := stocktest.NewClock(stocktest.Epoch)
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Clock: clock, RetryWait: time.Millisecond})
			ctx := t.Context()
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if err := s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 2}}}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(2 * time.Minute)
			f.armExec("SET LOCAL lock_timeout")
			got, err := s.ReclaimExpired(ctx, 10)
			if f.fault.Load() != faultNone {
				t.Fatalf("the fault was never hit (%v)", err)
			}
			if errors.Is(err, stock.ErrUnknownOutcome) {
				t.Fatalf("ReclaimExpired with its lock_timeout setting lost: %v; nothing was written, want no unknown outcome", err)
			}
			if err == nil && len(got) != 1 {
				t.Fatalf("ReclaimExpired returned %v", got)
			}
		})
	}
}

// On PostgreSQL one UPDATE can wait for a row lock more than once: for the
// tuple lock while another waiter holds it, then, once that waiter gives
// up, for the transaction that holds the row. lock_timeout bounds each
// wait, not their sum; the transaction's statements are kept within
// LockWait in all, so the Deduct answers contention after about one
// LockWait, not two (the fault matrix's lock storm saw 3s calls against a
// 2.5s bound with LockWait 1s).
func TestPGChainedLockWaitsStayWithinLockWait(t *testing.T) {
	for _, b := range backends() {
		if b.dialect != sqlstock.Postgres {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			table := testdb.Unique("sgs")
			const wait = 600 * time.Millisecond
			// One attempt: a call runs a lock wait again within two
			// LockWaits, and this test is of one transaction's waits.
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Table: table, LockWait: wait, MaxGroup: 1, MaxAttempts: 1})
			ctx := t.Context()
			// A per-user limit sends the Deduct down the transaction path.
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 5}); err != nil {
				t.Fatal(err)
			}
			holdLock(t, db, b.dialect, table)
			// The waiter ahead: it takes the tuple lock, waits for the
			// holder, and gives up at 0.9 LockWait, handing the tuple lock on.
			ahead := make(chan error, 1)
			go func() {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					ahead <- err
					return
				}
				defer func() { _ = tx.Rollback() }()
				if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = '540ms'"); err != nil {
					ahead <- err
					return
				}
				_, err = tx.ExecContext(ctx, "UPDATE "+table+" SET available = available WHERE sku = 'a'")
				ahead <- err
			}()
			waitForLockWaiter(t, db, b.dialect, table)
			start := time.Now()
			err := s.Deduct(ctx, stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
			took := time.Since(start)
			if !errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome) {
				t.Fatalf("Deduct behind a waiter and a holder: %v; want contention (nothing applied)", err)
			}
			if took > wait*8/5 { // the two waits add up to 1.9 LockWait
				t.Fatalf("Deduct took %v, want about LockWait (%v): the two lock waits were added up", took, wait)
			}
			if e := <-ahead; e == nil {
				t.Fatal("the waiter ahead got the lock: the holder let go too early")
			}
			if lv, err := s.Levels(ctx, "a"); err != nil || lv.Available != 10 || lv.Held != 0 {
				t.Fatalf("levels %+v, %v; want nothing taken", lv, err)
			}
		})
	}
}
