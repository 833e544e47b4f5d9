package sqlstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// lateStore is a PostgreSQL Store of LockWait 200ms (a transaction's
// statements end 250ms after its BEGIN, an attempt three LockWaits after
// the call's start) over a SKU with a per-user limit (so a Deduct runs a
// transaction), on connections through a flaky connector whose late
// answers the test arms.
func lateStore(t *testing.T, b backend) (*sqlstock.Store, *flaky) {
	db, f := openFlaky(t, b)
	s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, LockWait: 200 * time.Millisecond, MaxGroup: 1})
	if err := s.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 10, PerUserLimit: 5}); err != nil {
		t.Fatal(err)
	}
	return s, f
}

// A transaction whose statements' time ran out is rolled back without its
// COMMIT: nothing was applied, and the Deduct answers stock.ErrContention,
// also when the attempt's own time has run out by the time the Store
// looks at the failure (the answer that ended the statements came late,
// or the ROLLBACK's did). It answered stock.ErrUnknownOutcome.
func TestTransactionCutByItsStatementsTimeAppliedNothing(t *testing.T) {
	for _, tc := range []struct {
		name           string
		insert, rollbk time.Duration // the ledger INSERT's answer, the ROLLBACK's, late by
		fired          int32
	}{
		{"starved past the attempt", 650 * time.Millisecond, 0, 1},
		{"a slow rollback past the attempt", 300 * time.Millisecond, 400 * time.Millisecond, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, b := range backends() {
				if b.dialect != sqlstock.Postgres {
					// SQLite runs in-process, its transactions not cut by a
					// deadline; MySQL and MariaDB run the same transactions
					// (txOn), but their lock waits, and so the times here,
					// are whole seconds.
					continue
				}
				t.Run(b.name, func(t *testing.T) {
					b.need(t)
					// A machine that stalls the Deduct before its INSERT
					// is sent (250ms after BEGIN) cuts the transaction
					// before the late answer: another try, on a new Store.
					var s *sqlstock.Store
					var l *flaky
					var err error
					for try := 0; try < 5 && (l == nil || l.lateFired.Load() == 0); try++ {
						s, l = lateStore(t, b)
						l.armLateExec("INSERT INTO", tc.insert)
						l.armLateRollback(tc.rollbk)
						err = s.Deduct(t.Context(), stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
					}
					if got := l.lateFired.Load(); got != tc.fired {
						t.Fatalf("%d of %d late answers handed out (Deduct: %v)", got, tc.fired, err)
					}
					if lv, lerr := s.Levels(t.Context(), "a"); lerr != nil || lv.Available != 10 || lv.Held != 0 {
						t.Fatalf("levels %+v, %v; want nothing taken", lv, lerr)
					}
					if !errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome) {
						t.Fatalf("Deduct: %v; want stock.ErrContention (nothing applied), not an unknown outcome", err)
					}
				})
			}
		})
	}
}
