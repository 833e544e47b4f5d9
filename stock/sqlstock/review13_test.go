package sqlstock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
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
				createTablesAtOnce(t, db, cfg, round)
				s, err := sqlstock.New(db.DB, cfg)
				mustOK(t, "New", err)
				mustOK(t, "RevertItems after the upgrade", s.RevertItems(t.Context(), mkReturn("r1", "old1", mkItem("a", 1))))
				wantLevels(t, s, fmt.Sprintf("round %d", round), "a", 9, 1, 0)
			}
		})
	}
}

// Concurrent repeats of one return (the same OpID and items, as retries
// after lost replies are) all answer nil, and it applies once.
func TestReviewConcurrentRepeatsOfOneReturn(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect, Strategy: st})
		ctx := t.Context()
		mustOK(t, "PutOnSale a", s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 20, PerUserLimit: 10}))
		mustOK(t, "PutOnSale b", s.PutOnSale(ctx, stock.Listing{SKU: "b", Units: 5}))
		mustOK(t, "Deduct", s.Deduct(ctx, mkOrder("o1", "u1", mkItem("a", 4), mkItem("b", 2))))
		for _, r := range []stock.Return{mkReturn("r1", "o1", mkItem("a", 1), mkItem("b", 1)), mkReturn("r2", "o1", mkItem("a", 3), mkItem("b", 1))} {
			var wg sync.WaitGroup
			for range 12 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := s.RevertItems(ctx, r)
					for errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome) {
						err = s.RevertItems(ctx, r)
					}
					if err != nil {
						t.Errorf("RevertItems %s: %v, want nil", r.OpID, err)
					}
				}()
			}
			wg.Wait()
		}
		wantLevels(t, s, "after the returns", "a", 20, 0, 0)
		wantLevels(t, s, "after the returns", "b", 5, 0, 0)
		if n := countRows(t, s, returnsTable(s)); n != 2 {
			t.Fatalf("%d returns recorded, want 2", n)
		}
	})
}

// An extension answered nil is never reclaimed at the old deadline: one
// Store extends orders live at its clock while another, whose clock is at
// their deadline, reclaims them. Each order ends held with the new
// deadline (its extension answered nil) or expired (ErrHoldExpired), and
// the units agree.
func TestReviewExtendRacesReclaimAtTheOldDeadline(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			ctx := t.Context()
			early := stocktest.NewClock(stocktest.Epoch)
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Clock: early})
			names := s.Tables()
			late := stocktest.NewClock(stocktest.Epoch.Add(time.Minute))
			r, err := sqlstock.New(db.DB, sqlstock.Config{Dialect: b.dialect, Clock: late, Table: names[0], Ledger: names[1]})
			mustOK(t, "New", err)
			const orders = 40
			mustOK(t, "PutOnSale", s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 200, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}))
			mustOK(t, "PutOnSale", s.PutOnSale(ctx, stock.Listing{SKU: "b", Units: 200, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}))
			ids := make([]string, orders)
			for i := range ids {
				ids[i] = fmt.Sprintf("o%02d", i)
				mustOK(t, "Deduct", s.Deduct(ctx, mkOrder(ids[i], "", mkItem("a", 2), mkItem("b", 1))))
			}
			early.Advance(time.Minute - time.Millisecond)
			to := stocktest.Epoch.Add(5 * time.Minute)
			answers := make([]error, orders)
			var wg sync.WaitGroup
			for i, id := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := s.ExtendHold(ctx, id, to)
					for errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome) {
						err = s.ExtendHold(ctx, id, to)
					}
					answers[i] = err
				}()
			}
			var reclaimed []stock.Reclaimed
			var mu sync.Mutex
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						got, err := r.ReclaimExpired(ctx, 7)
						if err != nil && !errors.Is(err, stock.ErrContention) {
							t.Errorf("ReclaimExpired: %v", err)
						}
						mu.Lock()
						reclaimed = append(reclaimed, got...)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			got, err := r.ReclaimExpired(ctx, 1000)
			mustOK(t, "ReclaimExpired", err)
			reclaimed = append(reclaimed, got...)
			infos, err := s.Orders(ctx, ids)
			mustOK(t, "Orders", err)
			lines := map[string]int{}
			for _, l := range reclaimed {
				lines[l.OrderID]++
			}
			var held int64
			for i, in := range infos {
				switch {
				case answers[i] == nil:
					if in.State != stock.StateHeld || !in.Deadline.Equal(to) || lines[in.ID] != 0 {
						t.Errorf("%s: extension answered nil, but %v with deadline %v, %d lines reclaimed", in.ID, in.State, in.Deadline, lines[in.ID])
					}
					held++
				case errors.Is(answers[i], stock.ErrHoldExpired):
					if in.State != stock.StateExpired || lines[in.ID] != 2 {
						t.Errorf("%s: ErrHoldExpired, but %v, %d lines reclaimed", in.ID, in.State, lines[in.ID])
					}
				default:
					t.Errorf("%s: ExtendHold: %v", in.ID, answers[i])
				}
			}
			t.Logf("%d of %d orders extended", held, orders)
			wantLevels(t, s, "after the race", "a", 200-2*held, 2*held, 0)
			wantLevels(t, s, "after the race", "b", 200-held, held, 0)
		})
	}
}

// A partial revert (and a Confirm) waits at most Config.LockWait for the
// order's lines, held by another transaction: then it is contention, and
// once the lock goes a retry applies.
func TestReviewRevertItemsLockWaitIsBounded(t *testing.T) {
	for _, b := range backends() {
		if b.dialect == sqlstock.SQLite {
			continue // one writer: no row locks to wait for
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect,
				LockWait: 100 * time.Millisecond, MaxAttempts: 2, RetryWait: time.Millisecond})
			ctx := t.Context()
			mustOK(t, "PutOnSale", settled(t, func() error { return s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}) }))
			mustOK(t, "Deduct", settled(t, func() error { return s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{mkItem("a", 3)}}) }))
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			for _, q := range []string{"BEGIN", "SELECT qty FROM " + quote(b.dialect, s.Tables()[1]) + " WHERE order_id = 'o1' FOR UPDATE"} {
				if _, err := conn.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			for name, call := range map[string]func() error{
				"RevertItems": func() error { return s.RevertItems(ctx, mkReturn("r1", "o1", mkItem("a", 1))) },
				"Confirm":     func() error { return s.Confirm(ctx, "o1") },
			} {
				start := time.Now()
				err := call()
				took := time.Since(start)
				if !errors.Is(err, stock.ErrContention) {
					t.Errorf("%s under a held lock: %v, want stock.ErrContention", name, err)
				}
				if took > 5*time.Second {
					t.Errorf("%s under a held lock took %v", name, took)
				}
			}
			if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
			mustOK(t, "RevertItems once the lock is gone", onceLockGone(t, func() error {
				return s.RevertItems(ctx, mkReturn("r1", "o1", mkItem("a", 1)))
			}, stock.ErrContention, stock.ErrUnknownOutcome))
			wantLevels(t, s, "after the return", "a", 8, 2, 0)
		})
	}
}

// A reclaim pass waits at most Config.LockWait for the lines of a due
// order another transaction holds: then it is contention, and once the
// lock goes the next pass returns the order.
func TestReviewReclaimLockWaitIsBounded(t *testing.T) {
	for _, b := range backends() {
		if b.dialect == sqlstock.SQLite {
			continue // one writer: no row locks to wait for
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			clock := stocktest.NewClock(stocktest.Epoch)
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Clock: clock,
				LockWait: 100 * time.Millisecond, MaxAttempts: 2, RetryWait: time.Millisecond})
			ctx := t.Context()
			mustOK(t, "PutOnSale", settled(t, func() error {
				return s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute})
			}))
			mustOK(t, "Deduct", settled(t, func() error { return s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{mkItem("a", 3)}}) }))
			mustOK(t, "RevertItems", settled(t, func() error { return s.RevertItems(ctx, mkReturn("r1", "o1", mkItem("a", 1))) }))
			clock.Advance(time.Minute)
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			for _, q := range []string{"BEGIN", "SELECT qty FROM " + quote(b.dialect, s.Tables()[1]) + " WHERE order_id = 'o1' FOR UPDATE"} {
				if _, err := conn.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			start := time.Now()
			_, err = s.ReclaimExpired(ctx, 10)
			took := time.Since(start)
			if !errors.Is(err, stock.ErrContention) {
				t.Errorf("ReclaimExpired under a held lock: %v, want stock.ErrContention", err)
			}
			if took > 5*time.Second {
				t.Errorf("ReclaimExpired under a held lock took %v", took)
			}
			if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
			var got []stock.Reclaimed
			err = onceLockGone(t, func() (err error) {
				got, err = s.ReclaimExpired(ctx, 10)
				return err
			}, stock.ErrContention)
			if err != nil || len(got) != 1 || got[0].Qty != 2 {
				t.Fatalf("ReclaimExpired once the lock is gone = %+v, %v; want o1's 2 units left", got, err)
			}
			wantLevels(t, s, "after the reclaim", "a", 10, 0, 0)
		})
	}
}

// CreateTables run at once by several Stores over no tables creates them
// once, and every call succeeds.
func TestReviewConcurrentCreateTables(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			for round := range 4 {
				cfg := sqlstock.Config{Dialect: b.dialect, Table: testdb.Unique("sgs"), Ledger: testdb.Unique("sgl")}
				t.Cleanup(func() {
					for _, table := range []string{cfg.Ledger + "_returns", cfg.Ledger + "_ops", cfg.Ledger, cfg.Table} {
						if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+quote(b.dialect, table)); err != nil {
							t.Errorf("drop %s: %v", table, err)
						}
					}
				})
				createTablesAtOnce(t, db, cfg, round)
			}
		})
	}
}

// Concurrent Deducts that the Atomic strategy groups, some with their own
// hold time, some without and some past the SKU's maximum: only those
// past it are refused (ErrHoldTooLong, nothing taken), every other order
// gets its own deadline, and the counts are exact.
func TestReviewGroupedOwnHoldTimesUnderLoad(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			clock := stocktest.NewClock(stocktest.Epoch)
			s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect, Clock: clock})
			ctx := t.Context()
			mustOK(t, "PutOnSale", s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 1000, HoldTTL: time.Minute, MaxHoldTTL: 5 * time.Minute}))
			const n = 60
			ttl := func(i int) time.Duration {
				switch i % 3 {
				case 0:
					return 0
				case 1:
					return 3 * time.Minute
				}
				if i%2 == 0 {
					return 6 * time.Minute // past the maximum
				}
				return 5 * time.Minute
			}
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					o := stock.Order{ID: fmt.Sprintf("o%02d", i), Items: []stock.Item{mkItem("a", 2)}, HoldTTL: ttl(i)}
					err := s.Deduct(ctx, o)
					for errors.Is(err, stock.ErrContention) {
						err = s.Deduct(ctx, o)
					}
					errs[i] = err
				}()
			}
			wg.Wait()
			var held int64
			for i, err := range errs {
				id := fmt.Sprintf("o%02d", i)
				if ttl(i) > 5*time.Minute {
					if !errors.Is(err, stock.ErrHoldTooLong) {
						t.Errorf("%s with a hold past the maximum: %v, want ErrHoldTooLong", id, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", id, err)
					continue
				}
				held += 2
				want := ttl(i)
				if want == 0 {
					want = time.Minute
				}
				wantDeadline(t, s, id, want)
			}
			wantLevels(t, s, "after the deducts", "a", 1000-held, held, 0)
			t.Logf("%d groups", s.Groups())
		})
	}
}

// createTablesAtOnce runs CreateTables of cfg from four Stores at once and
// fails the test on any error.
func createTablesAtOnce(t *testing.T, db *sqlx.DB, cfg sqlstock.Config, round int) {
	t.Helper()
	const stores = 4
	var wg sync.WaitGroup
	errs := make([]error, stores)
	for i := range stores {
		wg.Go(func() {
			s, err := sqlstock.New(db.DB, cfg)
			if err == nil {
				err = s.CreateTables(t.Context())
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("round %d: CreateTables of store %d: %v", round, i, err)
		}
	}
}
