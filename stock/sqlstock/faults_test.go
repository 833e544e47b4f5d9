package sqlstock_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A lost COMMIT reply is resolved from the ledger: the call answers what
// happened, and the units move exactly once.
func TestLostCommitIsResolvedFromTheLedger(t *testing.T) {
	for _, b := range serverBackends() {
		for _, st := range strategies {
			t.Run(b.name+"/"+st.String(), func(t *testing.T) {
				db, f := openFlaky(t, b)
				s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Strategy: st})
				ctx := t.Context()
				for _, sku := range []string{"a", "b"} {
					if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10}); err != nil {
						t.Fatal(err)
					}
				}
				two := func(id string) stock.Order {
					return stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}}
				}
				steps := []struct {
					fault       int32
					call        func() error
					avail, held int64
					sold        int64
				}{
					{faultAfterCommit, func() error { return s.Deduct(ctx, two("o1")) }, 9, 1, 0},
					{faultBeforeCommit, func() error { return s.Deduct(ctx, two("o2")) }, 8, 2, 0},
					{faultAfterCommit, func() error { return s.Confirm(ctx, "o1") }, 8, 1, 1},
					{faultAfterCommit, func() error { return s.Revert(ctx, "o2") }, 9, 0, 1},
					{faultBeforeCommit, func() error { return s.Revert(ctx, "o1") }, 10, 0, 0},
				}
				for i, step := range steps {
					f.fault.Store(step.fault)
					if err := step.call(); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if f.fault.Load() != faultNone {
						t.Fatalf("step %d: the fault was never hit", i)
					}
					for _, sku := range []string{"a", "b"} {
						lv, err := s.Levels(ctx, sku)
						if err != nil || lv.Available != step.avail || lv.Held != step.held || lv.Sold != step.sold {
							t.Fatalf("step %d: %s levels %+v, %v; want %d/%d/%d", i, sku, lv, err, step.avail, step.held, step.sold)
						}
					}
				}
			})
		}
	}
}

// With one attempt allowed, a lost COMMIT reply is reported as an unknown
// outcome; the caller's retry with the same order ID then settles it.
func TestLostCommitWithoutRetriesIsUnknownOutcome(t *testing.T) {
	for _, b := range serverBackends() {
		t.Run(b.name, func(t *testing.T) {
			db, f := openFlaky(t, b)
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, MaxAttempts: 1})
			ctx := t.Context()
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 5}); err != nil {
				t.Fatal(err)
			}
			o := stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 2}}}
			f.fault.Store(faultAfterCommit)
			err := s.Deduct(ctx, o)
			if !errors.Is(err, stock.ErrUnknownOutcome) || stock.IsBusiness(err) {
				t.Fatalf("Deduct after a lost COMMIT reply: %v, want stock.ErrUnknownOutcome", err)
			}
			if err := s.Deduct(ctx, o); err != nil {
				t.Fatalf("retried Deduct: %v", err)
			}
			if lv, _ := s.Levels(ctx, "a"); lv.Available != 8 || lv.Held != 2 {
				t.Fatalf("levels %+v, want 8 available, 2 held", lv)
			}
		})
	}
}

// PostgreSQL's one-statement deduct: a lost reply is resolved the same way.
func TestLostReplyOfOneStatementDeduct(t *testing.T) {
	for _, b := range serverBackends() {
		if b.dialect != sqlstock.Postgres {
			continue
		}
		db, f := openFlaky(t, b)
		s := newStore(t, db, sqlstock.Config{Dialect: b.dialect})
		ctx := t.Context()
		if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
			t.Fatal(err)
		}
		f.fault.Store(faultAfterWithExec)
		if err := s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 3}}}); err != nil {
			t.Fatal(err)
		}
		if f.fault.Load() != faultNone {
			t.Fatal("the one-statement deduct was not used")
		}
		if lv, _ := s.Levels(ctx, "a"); lv.Available != 7 || lv.Held != 3 {
			t.Fatalf("levels %+v, want 7 available, 3 held", lv)
		}
	}
}

// A write lock held elsewhere past Config.LockWait is contention, never
// sold out, and nothing is written.
func TestLockWaitIsContention(t *testing.T) {
	for _, b := range backends() {
		// Every strategy's lock waits are bounded by LockWait, and a lock
		// wait is run again only within two LockWaits of the call's start
		// (and MaxAttempts): the call answers within its bound.
		for _, st := range strategies {
			t.Run(b.name+"/"+st.String(), func(t *testing.T) {
				db := b.open(t)
				table := testdb.Unique("sgs")
				s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Strategy: st, Table: table,
					LockWait: 100 * time.Millisecond, MaxAttempts: 2, RetryWait: time.Millisecond})
				ctx := t.Context()
				if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
					t.Fatal(err)
				}
				release := holdLock(t, db, b.dialect, table)
				start := time.Now()
				err := s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
				if took, bound := time.Since(start), s.AnswerBound(); took > bound+time.Second {
					t.Fatalf("Deduct under a held lock took %v, past its bound %v and a second's margin", took, bound)
				}
				var ce *sqlstock.ContentionError
				if b.dialect == sqlstock.Postgres && st == sqlstock.Atomic {
					// PostgreSQL's one-statement deduct cannot carry
					// lock_timeout: it is canceled at LockWait, an unknown
					// outcome until the retry (or a read) tells.
					if !errors.Is(err, stock.ErrUnknownOutcome) && !errors.Is(err, stock.ErrContention) {
						t.Fatalf("Deduct under a held lock: %v, want stock.ErrUnknownOutcome or ErrContention", err)
					}
					// The canceled statement may still run once the lock
					// goes: the retry with the same ID tells, and takes once.
					release()
					if err := s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
						t.Fatalf("retry once the lock is gone: %v", err)
					}
					if lv, _ := s.Levels(ctx, "a"); lv.Available != 9 || lv.Held != 1 {
						t.Fatalf("levels %+v after the retry, want 9 available, 1 held", lv)
					}
					return
				} else if !errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrSoldOut) || !errors.As(err, &ce) || ce.Attempts < 1 || ce.Attempts > 2 {
					t.Fatalf("Deduct under a held lock: %v, want stock.ErrContention after 1 or 2 attempts (MaxAttempts)", err)
				}
				release()
				if lv, _ := s.Levels(ctx, "a"); lv.Available != 10 || lv.Held != 0 {
					t.Fatalf("levels %+v after a refused deduct", lv)
				}
				if err := s.Revert(ctx, "o1"); !errors.Is(err, stock.ErrUnknownOrder) {
					t.Fatalf("Revert of the refused order: %v, want stock.ErrUnknownOrder", err)
				}
				if err := s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
					t.Fatalf("Deduct once the lock is gone: %v", err)
				}
			})
		}
	}
}

// holdLock takes the write lock of SQLite, or the row lock of SKU "a",
// in a transaction of its own until release is called.
func holdLock(t *testing.T, db *sqlx.DB, d sqlstock.Dialect, table string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	begin, lock := "BEGIN", "SELECT available FROM "+quote(d, table)+" WHERE sku = 'a' FOR UPDATE"
	if d == sqlstock.SQLite {
		begin, lock = "BEGIN IMMEDIATE", "SELECT 1"
	}
	for _, q := range []string{begin, lock} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	done := false
	release = func() {
		if !done {
			done = true
			_, _ = conn.ExecContext(ctx, "ROLLBACK")
			_ = conn.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// An optimistic Deduct whose row changes between its read and its write
// every time gives up with stock.ErrContention, never stock.ErrSoldOut,
// and takes nothing. The Clock, read between the two, makes the change.
func TestOptimisticGivesUpWithContention(t *testing.T) {
	for _, b := range serverBackends() {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t)
			var (
				other *sqlstock.Store
				armed atomic.Bool
				bumps atomic.Int64
			)
			meddler := stock.ClockFunc(func() time.Time {
				if armed.Load() {
					op := stock.Restock{OpID: "op-" + strconv.FormatInt(bumps.Load(), 10), SKU: "a", Units: 1}
					if err := other.Restock(context.Background(), op); err != nil {
						t.Errorf("Restock: %v", err)
					}
					bumps.Add(1)
				}
				return time.Now()
			})
			cfg := sqlstock.Config{Dialect: b.dialect, Strategy: sqlstock.Optimistic, Clock: meddler,
				MaxAttempts: 4, RetryWait: time.Millisecond, Table: testdb.Unique("sgs"), Ledger: testdb.Unique("sgl")}
			s := newStore(t, db, cfg)
			var err error
			otherCfg := cfg
			otherCfg.Clock = nil // Restock reads its Store's clock: not the meddler's
			if other, err = sqlstock.New(db.DB, otherCfg); err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			err = s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
			armed.Store(false)
			var ce *sqlstock.ContentionError
			if !errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrSoldOut) || !errors.As(err, &ce) || ce.Attempts != 4 {
				t.Fatalf("Deduct: %v, want stock.ErrContention after 4 attempts", err)
			}
			if lv, _ := s.Levels(ctx, "a"); lv.Available != 10+bumps.Load() || lv.Held != 0 {
				t.Fatalf("levels %+v after %d restocks and no deduct", lv, bumps.Load())
			}
		})
	}
}
