package sqlstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// deadlineOf returns the deadline Orders reports for id.
func deadlineOf(t *testing.T, s *sqlstock.Store, id string) time.Time {
	t.Helper()
	infos, err := s.Orders(t.Context(), []string{id})
	if err != nil || infos[0].State == stock.StateUnknown {
		t.Fatalf("Orders(%s) = %+v, %v", id, infos, err)
	}
	return infos[0].Deadline
}

// wantDeadline fails the test unless id's deadline is Epoch + d.
func wantDeadline(t *testing.T, s *sqlstock.Store, id string, d time.Duration) {
	t.Helper()
	if got := deadlineOf(t, s, id); !got.Equal(stocktest.Epoch.Add(d)) {
		t.Fatalf("%s: deadline %v, want Epoch + %v", id, got.Sub(stocktest.Epoch), d)
	}
}

// wantSKUErr fails the test unless err matches target as a *stock.SKUError
// naming sku.
func wantSKUErr(t *testing.T, what string, err, target error, sku string) {
	t.Helper()
	var se *stock.SKUError
	if !errors.Is(err, target) || !errors.As(err, &se) || se.SKU != sku {
		t.Fatalf("%s: %v, want %v naming %s", what, err, target, sku)
	}
}

// An order's own hold time is bounded by the shortest maximum of its SKUs
// and is not part of its identity; ExtendHold moves the deadline of every
// line within that bound, the reclaimer honours it, and it refuses in the
// reference's order.
func TestOwnHoldTimeAndExtension(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		clock := stocktest.NewClock(stocktest.Epoch)
		s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect, Strategy: st, Clock: clock})
		ctx := t.Context()
		mustOK(t, "PutOnSale a", s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}))
		mustOK(t, "PutOnSale b", s.PutOnSale(ctx, stock.Listing{SKU: "b", Units: 10, HoldTTL: 2 * time.Minute}))
		for sku, want := range map[string]time.Duration{"a": 10 * time.Minute, "b": 2 * time.Minute} {
			if lv, err := s.Levels(ctx, sku); err != nil || lv.MaxHoldTTL != want {
				t.Fatalf("Levels(%s) = %+v, %v; want MaxHoldTTL %v", sku, lv, err, want)
			}
			if sn, err := s.Snapshot(ctx, []string{sku}); err != nil || sn[0].MaxHoldTTL != want {
				t.Fatalf("Snapshot(%s) = %+v, %v; want MaxHoldTTL %v", sku, sn, err, want)
			}
		}

		o := func(id string, ttl time.Duration, items ...stock.Item) stock.Order {
			return stock.Order{ID: id, UserID: "u1", Items: items, HoldTTL: ttl}
		}
		wantSKUErr(t, "an own hold past a's maximum", s.Deduct(ctx, o("o1", 11*time.Minute, mkItem("a", 1))), stock.ErrHoldTooLong, "a")
		wantSKUErr(t, "an own hold past b's maximum", s.Deduct(ctx, o("o2", 3*time.Minute, mkItem("a", 1), mkItem("b", 1))), stock.ErrHoldTooLong, "b")
		wantLevels(t, s, "after the refusals", "a", 10, 0, 0)
		wantLevels(t, s, "after the refusals", "b", 10, 0, 0)
		if infos, err := s.Orders(ctx, []string{"o1", "o2"}); err != nil || infos[0].State != stock.StateUnknown || infos[1].State != stock.StateUnknown {
			t.Fatalf("refused orders are in the ledger: %+v, %v", infos, err)
		}
		// Sold out comes before a hold too long, as in the reference.
		wantSKUErr(t, "sold out and too long", s.Deduct(ctx, o("o1", 11*time.Minute, mkItem("a", 11))), stock.ErrSoldOut, "a")

		mustOK(t, "Deduct o3, own hold 30s", s.Deduct(ctx, o("o3", 30*time.Second, mkItem("a", 1), mkItem("b", 1))))
		wantDeadline(t, s, "o3", 30*time.Second)
		mustOK(t, "Deduct o3 again with another hold time", s.Deduct(ctx, o("o3", 90*time.Second, mkItem("a", 1), mkItem("b", 1))))
		wantDeadline(t, s, "o3", 30*time.Second)
		// On PostgreSQL's Atomic Store this is the one-statement deduct.
		mustOK(t, "Deduct o4, the SKU's hold", s.Deduct(ctx, o("o4", 0, mkItem("a", 2))))
		wantDeadline(t, s, "o4", time.Minute)
		mustOK(t, "Deduct o5, the longest own hold", s.Deduct(ctx, o("o5", 10*time.Minute, mkItem("a", 1))))
		wantDeadline(t, s, "o5", 10*time.Minute)
		wantLevels(t, s, "held", "a", 6, 4, 0)

		ext := func(id string, d time.Duration) error { return s.ExtendHold(ctx, id, stocktest.Epoch.Add(d)) }
		mustOK(t, "ExtendHold o4 to its bound", ext("o4", 10*time.Minute))
		wantDeadline(t, s, "o4", 10*time.Minute)
		if err := ext("o4", 10*time.Minute+time.Millisecond); !errors.Is(err, stock.ErrHoldTooLong) {
			t.Fatalf("ExtendHold past the bound: %v, want ErrHoldTooLong", err)
		}
		mustOK(t, "ExtendHold o4 to an earlier deadline", ext("o4", 5*time.Minute))
		wantDeadline(t, s, "o4", 10*time.Minute)
		mustOK(t, "ExtendHold o4 to a deadline within its millisecond", s.ExtendHold(ctx, "o4", stocktest.Epoch.Add(10*time.Minute+time.Microsecond)))
		if err := ext("o3", 2*time.Minute+time.Millisecond); !errors.Is(err, stock.ErrHoldTooLong) {
			t.Fatalf("ExtendHold of o3 past b's maximum: %v, want ErrHoldTooLong", err)
		}
		mustOK(t, "ExtendHold o3", ext("o3", 2*time.Minute))
		wantDeadline(t, s, "o3", 2*time.Minute)

		clock.Advance(time.Minute)
		if got, err := s.ReclaimExpired(ctx, 100); err != nil || len(got) != 0 {
			t.Fatalf("reclaimed %+v, %v before any extended deadline", got, err)
		}
		held, err := s.HeldBefore(ctx, stocktest.Epoch.Add(2*time.Minute), 10)
		if err != nil || len(held) != 1 || held[0].ID != "o3" || !held[0].Deadline.Equal(stocktest.Epoch.Add(2*time.Minute)) {
			t.Fatalf("HeldBefore(2m) = %+v, %v; want o3 at 2m", held, err)
		}
		clock.Advance(time.Minute)
		if err := ext("o3", 2*time.Minute+time.Second); !errors.Is(err, stock.ErrHoldExpired) {
			t.Fatalf("ExtendHold at the deadline: %v, want ErrHoldExpired", err)
		}
		got, err := s.ReclaimExpired(ctx, 100)
		if err != nil || len(got) != 2 || got[0].OrderID != "o3" || got[1].OrderID != "o3" {
			t.Fatalf("reclaimed %+v, %v; want o3's two lines", got, err)
		}
		if err := ext("o3", 3*time.Minute); !errors.Is(err, stock.ErrHoldExpired) {
			t.Fatalf("ExtendHold of an expired order: %v, want ErrHoldExpired", err)
		}
		mustOK(t, "Confirm o4", s.Confirm(ctx, "o4"))
		if err := ext("o4", 9*time.Minute); !errors.Is(err, stock.ErrOrderConfirmed) {
			t.Fatalf("ExtendHold of a confirmed order: %v, want ErrOrderConfirmed", err)
		}
		mustOK(t, "Revert o5", s.Revert(ctx, "o5"))
		if err := ext("o5", 9*time.Minute); !errors.Is(err, stock.ErrOrderClosed) {
			t.Fatalf("ExtendHold of a reverted order: %v, want ErrOrderClosed", err)
		}
		if err := ext("never", 9*time.Minute); !errors.Is(err, stock.ErrUnknownOrder) {
			t.Fatalf("ExtendHold of an unknown order: %v, want ErrUnknownOrder", err)
		}
		if err := ext("a}b", 9*time.Minute); !errors.Is(err, stock.ErrInvalid) {
			t.Fatalf("ExtendHold of an invalid ID: %v, want ErrInvalid", err)
		}
		wantLevels(t, s, "at the end", "a", 8, 0, 2)
		wantLevels(t, s, "at the end", "b", 10, 0, 0)
	})
}

// A grouped Deduct gives each order its own deadline and bound; an order
// whose own hold time is too long is refused alone, as it would be on its
// own, and the others of its group go through.
func TestGroupOwnHoldTimes(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			clock := stocktest.NewClock(stocktest.Epoch)
			s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect, Clock: clock})
			ctx := t.Context()
			mustOK(t, "PutOnSale", s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 5 * time.Minute}))
			o := func(id string, ttl time.Duration) stock.Order {
				return stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}, HoldTTL: ttl}
			}
			// All fit: the group's one conditional UPDATE.
			wantErrs(t, s.DeductGroup(ctx, []stock.Order{o("g1", 20*time.Second), o("g2", 0)}), []error{nil, nil})
			// One too long: decided order by order under the lock.
			wantErrs(t, s.DeductGroup(ctx, []stock.Order{o("g3", 5*time.Minute), o("g4", 6*time.Minute), o("g5", 0)}),
				[]error{nil, stock.ErrHoldTooLong, nil})
			if s.Groups() != 2 {
				t.Fatalf("%d groups written, want 2", s.Groups())
			}
			wantLevels(t, s, "after the groups", "a", 6, 4, 0)
			for id, d := range map[string]time.Duration{"g1": 20 * time.Second, "g2": time.Minute, "g3": 5 * time.Minute, "g5": time.Minute} {
				wantDeadline(t, s, id, d)
			}
			for _, id := range []string{"g1", "g5"} {
				mustOK(t, "ExtendHold "+id+" to its bound", s.ExtendHold(ctx, id, stocktest.Epoch.Add(5*time.Minute)))
				wantDeadline(t, s, id, 5*time.Minute)
			}
			if err := s.ExtendHold(ctx, "g2", stocktest.Epoch.Add(5*time.Minute+time.Millisecond)); !errors.Is(err, stock.ErrHoldTooLong) {
				t.Fatalf("ExtendHold past a grouped order's bound: %v, want ErrHoldTooLong", err)
			}
		})
	}
}

// In the caller's transaction a Deduct keeps the order's own hold time,
// and ExtendHold applies when the transaction commits.
func TestInTxOwnHoldTimeAndExtension(t *testing.T) {
	forEachTx(t, txStrategies, func(t *testing.T, b backend, st sqlstock.Strategy) {
		clock := stocktest.NewClock(stocktest.Epoch)
		c := newCaller(t, b, b.open(t), sqlstock.Config{Strategy: st, Clock: clock})
		ctx := t.Context()
		c.put(stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 3 * time.Minute})

		tx := c.begin(nil)
		ts := c.s.InTx(tx)
		own := func(id string, ttl time.Duration) stock.Order {
			return stock.Order{ID: id, Items: []stock.Item{mkItem("a", 1)}, HoldTTL: ttl}
		}
		wantSKUErr(t, "an own hold too long", ts.Deduct(ctx, own("o1", 4*time.Minute)), stock.ErrHoldTooLong, "a")
		mustOK(t, "Deduct o1 with its own hold", ts.Deduct(ctx, own("o1", 2*time.Minute)))
		mustOK(t, "Deduct o2", ts.Deduct(ctx, own("o2", 0)))
		c.commit(tx)
		wantDeadline(t, c.s, "o1", 2*time.Minute)
		wantDeadline(t, c.s, "o2", time.Minute)

		tx = c.begin(nil)
		mustOK(t, "ExtendHold o2", c.s.InTx(tx).ExtendHold(ctx, "o2", stocktest.Epoch.Add(3*time.Minute)))
		mustOK(t, "Rollback", tx.Rollback())
		wantDeadline(t, c.s, "o2", time.Minute)

		tx = c.begin(nil)
		ts = c.s.InTx(tx)
		mustOK(t, "ExtendHold o2", ts.ExtendHold(ctx, "o2", stocktest.Epoch.Add(3*time.Minute)))
		if err := ts.ExtendHold(ctx, "o1", stocktest.Epoch.Add(4*time.Minute)); !errors.Is(err, stock.ErrHoldTooLong) || errors.Is(err, sqlstock.ErrTxFailed) {
			t.Fatalf("ExtendHold past the bound: %v, want ErrHoldTooLong alone", err)
		}
		mustOK(t, "ExtendHold o2 repeated", ts.ExtendHold(ctx, "o2", stocktest.Epoch.Add(3*time.Minute)))
		c.commit(tx)
		wantDeadline(t, c.s, "o2", 3*time.Minute)
		c.want("after the extension", "a", 8, 2, 0)
	})
}

// An extension whose reply is lost is run again, and answers nil: the
// order has the new deadline, which the re-run finds. With the network
// down for the re-run too, the answer is an unknown outcome, and the
// caller's retry answers nil.
func TestExtendHoldLostReplyIsResolvedByRetry(t *testing.T) {
	for _, b := range serverBackends() {
		t.Run(b.name, func(t *testing.T) {
			db, f := openFlaky(t, b)
			clock := stocktest.NewClock(stocktest.Epoch)
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Clock: clock, RetryWait: time.Millisecond})
			t.Cleanup(func() { f.down.Store(false) }) // before the tables are dropped
			ctx := t.Context()
			mustOK(t, "PutOnSale", s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}))
			mustOK(t, "Deduct", s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{mkItem("a", 1)}}))

			f.armExec("UPDATE")
			mustOK(t, "ExtendHold, reply lost", s.ExtendHold(ctx, "o1", stocktest.Epoch.Add(10*time.Minute)))
			if f.fault.Load() != faultNone {
				t.Fatal("the fault was never hit")
			}
			wantDeadline(t, s, "o1", 10*time.Minute)

			f.downOnFault.Store(true)
			f.armExec("UPDATE")
			unknownOnly(t, "ExtendHold, reply lost and the network down", s.ExtendHold(ctx, "o1", stocktest.Epoch.Add(20*time.Minute)))
			f.down.Store(false)
			mustOK(t, "ExtendHold retried", s.ExtendHold(ctx, "o1", stocktest.Epoch.Add(20*time.Minute)))
			wantDeadline(t, s, "o1", 20*time.Minute)
			clock.Advance(15 * time.Minute)
			if got, err := s.ReclaimExpired(ctx, 10); err != nil || len(got) != 0 {
				t.Fatalf("reclaimed %+v, %v before the extended deadline", got, err)
			}
			wantLevels(t, s, "at the end", "a", 9, 1, 0)
		})
	}
}

// An extension waits at most Config.LockWait for the order's lines, held
// by another transaction: then it is contention (an unknown outcome on
// PostgreSQL, whose statement is canceled), and once the lock goes a
// retry extends the hold.
func TestExtendHoldLockWaitIsBounded(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			clock := stocktest.NewClock(stocktest.Epoch)
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Clock: clock,
				LockWait: 100 * time.Millisecond, MaxAttempts: 2, RetryWait: time.Millisecond})
			ctx := t.Context()
			mustOK(t, "PutOnSale", s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, MaxHoldTTL: time.Hour}))
			mustOK(t, "Deduct", s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{mkItem("a", 1)}}))

			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			begin, lock := "BEGIN", "SELECT qty FROM "+quote(b.dialect, s.Tables()[1])+" WHERE order_id = 'o1' FOR UPDATE"
			if b.dialect == sqlstock.SQLite {
				begin, lock = "BEGIN IMMEDIATE", "SELECT 1"
			}
			for _, q := range []string{begin, lock} {
				if _, err := conn.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			start := time.Now()
			err = s.ExtendHold(ctx, "o1", stocktest.Epoch.Add(30*time.Minute))
			took := time.Since(start)
			if b.dialect == sqlstock.Postgres {
				unknownOnly(t, "ExtendHold under a held lock", err)
			} else if !errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome) {
				t.Fatalf("ExtendHold under a held lock: %v, want stock.ErrContention", err)
			}
			if took > 5*time.Second {
				t.Fatalf("ExtendHold under a held lock took %v", took)
			}
			if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
			mustOK(t, "ExtendHold once the lock is gone", onceLockGone(t, func() error {
				return s.ExtendHold(ctx, "o1", stocktest.Epoch.Add(30*time.Minute))
			}, stock.ErrContention, stock.ErrUnknownOutcome))
			wantDeadline(t, s, "o1", 30*time.Minute)
		})
	}
}
