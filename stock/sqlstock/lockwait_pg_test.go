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
