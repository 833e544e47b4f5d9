package sqlstock_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

func mkReturn(op, orderID string, items ...stock.Item) stock.Return {
	return stock.Return{OpID: op, OrderID: orderID, Items: items}
}

// wantLevels fails the test unless sku has exactly these counts.
func wantLevels(t *testing.T, s *sqlstock.Store, when, sku string, avail, held, sold int64) {
	t.Helper()
	lv, err := s.Levels(t.Context(), sku)
	if err != nil || lv.Available != avail || lv.Held != held || lv.Sold != sold {
		t.Fatalf("%s: %s is available/held/sold %d/%d/%d (%v), want %d/%d/%d",
			when, sku, lv.Available, lv.Held, lv.Sold, err, avail, held, sold)
	}
}

// countRows counts the rows of one of s's tables.
func countRows(t *testing.T, s *sqlstock.Store, table string) int64 {
	t.Helper()
	var n int64
	if err := s.DB().QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+quote(s.Dialect(), table)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// returnsTable is the name of s's table of applied partial reverts.
func returnsTable(s *sqlstock.Store) string { return s.Tables()[3] }

// A partial revert whose COMMIT reply is lost is run again and answers
// from the returns table: nil, with the units returned once. With the
// network down for the re-run too, the answer is an unknown outcome, and
// the caller's retry answers nil, returning nothing more.
func TestRevertItemsLostCommitIsResolvedByRetry(t *testing.T) {
	for _, b := range serverBackends() {
		for _, st := range strategies {
			t.Run(b.name+"/"+st.String(), func(t *testing.T) {
				db, f := openFlaky(t, b)
				s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Strategy: st, RetryWait: time.Millisecond})
				t.Cleanup(func() { f.down.Store(false) }) // before the tables are dropped
				ctx := t.Context()
				mustOK(t, "PutOnSale a", s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 5}))
				mustOK(t, "PutOnSale b", s.PutOnSale(ctx, stock.Listing{SKU: "b", Units: 10}))
				mustOK(t, "Deduct", s.Deduct(ctx, mkOrder("o1", "u1", mkItem("a", 3), mkItem("b", 2))))

				steps := []struct {
					name     string
					fault    int32
					down     bool // the network stays down after the fault: the re-run fails too
					r        stock.Return
					a, b     [3]int64 // available, held, sold once settled
					returned int64    // rows of the returns table
				}{
					{"COMMIT reply lost", faultAfterCommit, false, mkReturn("r1", "o1", mkItem("a", 1)), [3]int64{8, 2, 0}, [3]int64{8, 2, 0}, 1},
					{"connection lost before COMMIT", faultBeforeCommit, false, mkReturn("r2", "o1", mkItem("b", 1)), [3]int64{8, 2, 0}, [3]int64{9, 1, 0}, 2},
					{"COMMIT reply lost, network down", faultAfterCommit, true, mkReturn("r3", "o1", mkItem("a", 1), mkItem("b", 1)), [3]int64{9, 1, 0}, [3]int64{10, 0, 0}, 3},
				}
				for _, step := range steps {
					f.downOnFault.Store(step.down)
					f.fault.Store(step.fault)
					err := s.RevertItems(ctx, step.r)
					if f.fault.Load() != faultNone {
						t.Fatalf("%s: the fault was never hit (%v)", step.name, err)
					}
					if step.down {
						unknownOnly(t, step.name, err)
						f.down.Store(false)
						err = s.RevertItems(ctx, step.r)
					}
					mustOK(t, step.name, err)
					mustOK(t, step.name+", repeated", s.RevertItems(ctx, step.r))
					wantLevels(t, s, step.name, "a", step.a[0], step.a[1], step.a[2])
					wantLevels(t, s, step.name, "b", step.b[0], step.b[1], step.b[2])
					if n := countRows(t, s, returnsTable(s)); n != step.returned {
						t.Fatalf("%s: %d returns recorded, want %d", step.name, n, step.returned)
					}
				}
				if n, err := s.UserUnits(ctx, "a", "u1"); err != nil || n != 1 {
					t.Fatalf("UserUnits = %d, %v; want 1", n, err)
				}
				// The rest is refunded, its COMMIT reply lost too: the order
				// ends refunded, every unit back once.
				mustOK(t, "Confirm", s.Confirm(ctx, "o1"))
				f.downOnFault.Store(false)
				f.fault.Store(faultAfterCommit)
				mustOK(t, "refund of the rest, COMMIT reply lost", s.RevertItems(ctx, mkReturn("r4", "o1", mkItem("a", 1))))
				wantLevels(t, s, "refunded", "a", 10, 0, 0)
				wantLevels(t, s, "refunded", "b", 10, 0, 0)
				infos, err := s.Orders(ctx, []string{"o1"})
				if err != nil || infos[0].State != stock.StateRefunded ||
					!slices.Equal(infos[0].Returned, []stock.Item{mkItem("a", 3), mkItem("b", 2)}) {
					t.Fatalf("Orders(o1) = %+v, %v; want refunded with a 3, b 2 returned", infos, err)
				}
			})
		}
	}
}

// Concurrent partial reverts of one order, each with its own operation
// ID, never give back more than a line took: of 20 returns of a unit of
// each line, exactly as many apply as the shorter line has units, and the
// others are refused naming it; then exactly what is left of the longer
// line applies, and the order ends returned whole. Held and confirmed
// orders alike; the returns table has one row per applied return.
func TestConcurrentRevertItemsNeverExceedTheLines(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		for _, confirmed := range []bool{false, true} {
			t.Run(fmt.Sprintf("confirmed=%v", confirmed), func(t *testing.T) {
				s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect, Strategy: st})
				ctx := t.Context()
				mustOK(t, "PutOnSale a", s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 20, PerUserLimit: 10}))
				mustOK(t, "PutOnSale b", s.PutOnSale(ctx, stock.Listing{SKU: "b", Units: 5}))
				mustOK(t, "Deduct", s.Deduct(ctx, mkOrder("o1", "u1", mkItem("a", 10), mkItem("b", 5))))
				want, end := stock.StateHeld, stock.StateReverted
				if confirmed {
					mustOK(t, "Confirm", s.Confirm(ctx, "o1"))
					want, end = stock.StateConfirmed, stock.StateRefunded
				}
				race := func(n int, prefix string, items ...stock.Item) (applied int, refused []error) {
					var (
						wg sync.WaitGroup
						mu sync.Mutex
					)
					for i := range n {
						wg.Add(1)
						go func() {
							defer wg.Done()
							r := mkReturn(fmt.Sprintf("%s-%d", prefix, i), "o1", items...)
							err := s.RevertItems(ctx, r)
							for errors.Is(err, stock.ErrContention) {
								err = s.RevertItems(ctx, r)
							}
							mu.Lock()
							defer mu.Unlock()
							if err == nil {
								applied++
							} else {
								refused = append(refused, err)
							}
						}()
					}
					wg.Wait()
					return applied, refused
				}

				applied, refused := race(20, "both", mkItem("a", 1), mkItem("b", 1))
				if applied != 5 || len(refused) != 15 {
					t.Fatalf("returns of both lines: %d applied, %d refused (%v); want 5 and 15", applied, len(refused), refused)
				}
				for _, err := range refused {
					var se *stock.SKUError
					if !errors.As(err, &se) || se.SKU != "b" || !errors.Is(err, stock.ErrExceedsOrder) {
						t.Fatalf("a refused return: %v, want ErrExceedsOrder naming b", err)
					}
				}
				infos, err := s.Orders(ctx, []string{"o1"})
				if err != nil || infos[0].State != want || !slices.Equal(infos[0].Returned, []stock.Item{mkItem("a", 5), mkItem("b", 5)}) {
					t.Fatalf("Orders(o1) = %+v, %v; want %v with a 5, b 5 returned", infos, err, want)
				}
				if n, err := s.UserUnits(ctx, "a", "u1"); err != nil || n != 5 {
					t.Fatalf("UserUnits = %d, %v; want 5", n, err)
				}

				applied, refused = race(12, "a", mkItem("a", 1))
				if applied != 5 || len(refused) != 7 {
					t.Fatalf("returns of line a: %d applied, %d refused (%v); want 5 and 7", applied, len(refused), refused)
				}
				for _, err := range refused {
					if !errors.Is(err, stock.ErrExceedsOrder) && !errors.Is(err, stock.ErrOrderClosed) {
						t.Fatalf("a refused return: %v, want ErrExceedsOrder or ErrOrderClosed", err)
					}
				}
				wantLevels(t, s, "all returned", "a", 20, 0, 0)
				wantLevels(t, s, "all returned", "b", 5, 0, 0)
				if n, err := s.UserUnits(ctx, "a", "u1"); err != nil || n != 0 {
					t.Fatalf("UserUnits = %d, %v; want 0", n, err)
				}
				infos, err = s.Orders(ctx, []string{"o1"})
				if err != nil || infos[0].State != end || !slices.Equal(infos[0].Returned, []stock.Item{mkItem("a", 10), mkItem("b", 5)}) {
					t.Fatalf("Orders(o1) = %+v, %v; want %v with everything returned", infos, err, end)
				}
				if n := countRows(t, s, returnsTable(s)); n != 10 {
					t.Fatalf("%d returns recorded, want 10", n)
				}
				mustOK(t, "Revert of the returned order", s.Revert(ctx, "o1"))
				wantLevels(t, s, "after Revert", "a", 20, 0, 0)
			})
		}
	})
}

// Returns in the caller's transaction apply when it commits and leave
// nothing when it rolls back; a repeat in a later transaction is nil.
func TestInTxRevertItems(t *testing.T) {
	forEachTx(t, txStrategies, func(t *testing.T, b backend, st sqlstock.Strategy) {
		c := newCaller(t, b, b.open(t), sqlstock.Config{Strategy: st})
		ctx := t.Context()
		c.put(stock.Listing{SKU: "a", Units: 10})
		mustOK(t, "Deduct", c.s.Deduct(ctx, mkOrder("o1", "u1", mkItem("a", 4))))

		tx := c.begin(nil)
		mustOK(t, "RevertItems", c.s.InTx(tx).RevertItems(ctx, mkReturn("r1", "o1", mkItem("a", 1))))
		mustOK(t, "Rollback", tx.Rollback())
		c.want("after ROLLBACK", "a", 6, 4, 0)

		tx = c.begin(nil)
		ts := c.s.InTx(tx)
		c.insert(tx, "refund-r1", "refund")
		mustOK(t, "RevertItems", ts.RevertItems(ctx, mkReturn("r1", "o1", mkItem("a", 1))))
		mustOK(t, "RevertItems repeated", ts.RevertItems(ctx, mkReturn("r1", "o1", mkItem("a", 1))))
		if err := ts.RevertItems(ctx, mkReturn("r2", "o1", mkItem("a", 4))); !errors.Is(err, stock.ErrExceedsOrder) || errors.Is(err, sqlstock.ErrTxFailed) {
			t.Fatalf("RevertItems past the line: %v, want ErrExceedsOrder alone", err)
		}
		if err := ts.RevertItems(ctx, mkReturn("r1", "o1", mkItem("a", 2))); !errors.Is(err, stock.ErrConflict) || errors.Is(err, sqlstock.ErrTxFailed) {
			t.Fatalf("RevertItems reusing r1: %v, want ErrConflict alone", err)
		}
		c.commit(tx)
		c.want("after COMMIT", "a", 7, 3, 0)

		tx = c.begin(nil)
		mustOK(t, "RevertItems in a later transaction", c.s.InTx(tx).RevertItems(ctx, mkReturn("r1", "o1", mkItem("a", 1))))
		c.commit(tx)
		c.want("after the repeat", "a", 7, 3, 0)
		if n := countRows(t, c.s, returnsTable(c.s)); n != 1 {
			t.Fatalf("%d returns recorded, want 1", n)
		}
	})
}

// A line partial reverts emptied takes none of a reclaim pass's limit:
// with a limit of 2, the pass returns the rest of a partly returned order
// and a second order, two lines in all.
func TestReclaimSkipsEmptiedLines(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		clock := stocktest.NewClock(stocktest.Epoch)
		s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect, Strategy: st, Clock: clock})
		ctx := t.Context()
		for _, sku := range []string{"a", "b", "c"} {
			mustOK(t, "PutOnSale "+sku, s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10, HoldTTL: time.Minute}))
		}
		mustOK(t, "Deduct o1", s.Deduct(ctx, mkOrder("o1", "u1", mkItem("a", 2), mkItem("b", 1))))
		mustOK(t, "RevertItems a", s.RevertItems(ctx, mkReturn("r1", "o1", mkItem("a", 2))))
		clock.Advance(time.Second)
		mustOK(t, "Deduct o2", s.Deduct(ctx, mkOrder("o2", "u1", mkItem("c", 3))))
		clock.Advance(time.Minute)
		got, err := s.ReclaimExpired(ctx, 2)
		want := []stock.Reclaimed{{OrderID: "o1", UserID: "u1", SKU: "b", Qty: 1}, {OrderID: "o2", UserID: "u1", SKU: "c", Qty: 3}}
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("ReclaimExpired(2) = %+v, %v; want %+v", got, err, want)
		}
		for _, sku := range []string{"a", "b", "c"} {
			wantLevels(t, s, "after the pass", sku, 10, 0, 0)
		}
	})
}

// Partial reverts, confirms, extensions and reclaims of the same orders,
// racing across their deadline, keep the books: every unit is available,
// held by a held order or sold to a confirmed one, exactly as the ledger
// says what each order still has, and each user's units are what their
// orders still take.
func TestPartialRevertsRaceConfirmExtendAndReclaim(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		clock := stocktest.NewClock(stocktest.Epoch)
		s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect, Strategy: st, Clock: clock})
		ctx := t.Context()
		const orders, units, qty = 16, 100, 3
		mustOK(t, "PutOnSale", s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: units, PerUserLimit: qty,
			HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}))
		ids := make([]string, orders)
		for i := range ids {
			ids[i] = fmt.Sprintf("o%02d", i)
			mustOK(t, "Deduct", s.Deduct(ctx, mkOrder(ids[i], fmt.Sprintf("u%d", i), mkItem("a", qty))))
		}
		clock.Advance(time.Minute - time.Millisecond)
		again := func(f func() error) error {
			err := f()
			for errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome) {
				err = f()
			}
			return err
		}
		var wg sync.WaitGroup
		fail := func(what string, err error, ok ...error) {
			for _, o := range ok {
				if errors.Is(err, o) {
					return
				}
			}
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
		for i, id := range ids {
			wg.Add(3)
			go func() {
				defer wg.Done()
				fail("RevertItems "+id, again(func() error { return s.RevertItems(ctx, mkReturn("r1", id, mkItem("a", 1))) }),
					stock.ErrHoldExpired)
				fail("RevertItems again "+id, again(func() error { return s.RevertItems(ctx, mkReturn("r2", id, mkItem("a", 1))) }),
					stock.ErrHoldExpired)
			}()
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					fail("Confirm "+id, again(func() error { return s.Confirm(ctx, id) }), stock.ErrHoldExpired, stock.ErrOrderClosed)
				}
			}()
			go func() {
				defer wg.Done()
				if i%3 == 0 {
					fail("ExtendHold "+id, again(func() error { return s.ExtendHold(ctx, id, stocktest.Epoch.Add(5*time.Minute)) }),
						stock.ErrHoldExpired, stock.ErrOrderConfirmed, stock.ErrOrderClosed)
				}
			}()
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			time.Sleep(5 * time.Millisecond)
			clock.Advance(time.Millisecond) // the deadline passes mid-race
		}()
		go func() {
			defer wg.Done()
			for range 5 {
				if err := again(func() error { _, err := s.ReclaimExpired(ctx, 7); return err }); err != nil {
					t.Errorf("ReclaimExpired: %v", err)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		wg.Wait()
		if _, err := s.ReclaimExpired(ctx, orders); err != nil {
			t.Fatal(err)
		}

		infos, err := s.Orders(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		var held, sold int64
		for i, in := range infos {
			var returned int64
			for _, r := range in.Returned {
				returned += r.Qty
			}
			left := qty - returned
			var user int64
			switch in.State {
			case stock.StateHeld:
				held, user = held+left, left
			case stock.StateConfirmed:
				sold, user = sold+left, left
			case stock.StateReverted, stock.StateRefunded:
				if left != 0 {
					t.Fatalf("%s is %v with %d units left", in.ID, in.State, left)
				}
			}
			if n, err := s.UserUnits(ctx, "a", fmt.Sprintf("u%d", i)); err != nil || n != user {
				t.Fatalf("UserUnits of %s's user = %d, %v; want %d (%+v)", in.ID, n, err, user, in)
			}
		}
		wantLevels(t, s, "after the race", "a", units-held-sold, held, sold)
	})
}
