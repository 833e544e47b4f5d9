package stocktest_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// zzRetry retries as the contract allows.
func zzRetry(call func() error) error {
	var err error
	for attempt := range 300 {
		err = call()
		if !errors.Is(err, stock.ErrContention) && !errors.Is(err, stock.ErrUnknownOutcome) {
			return err
		}
		time.Sleep(time.Duration(1+attempt%10) * time.Millisecond)
	}
	return err
}

// Restock "adds r.Units ... once per r.OpID", also when the same operation
// races itself, or races the same ID with another count (one applies, the
// other is ErrConflict).
func TestZZConcurrentRestocksApplyOnce(t *testing.T) {
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		zzSale(t, m, stock.Listing{SKU: "a", Units: 0})
		var wg sync.WaitGroup
		var five, seven, conflicts atomic.Int64
		for i := range 24 {
			wg.Go(func() {
				units := int64(5)
				if i%2 == 1 {
					units = 7
				}
				err := zzRetry(func() error { return m.Restock(ctx, stock.Restock{OpID: "op", SKU: "a", Units: units}) })
				switch {
				case err == nil && units == 5:
					five.Add(1)
				case err == nil:
					seven.Add(1)
				case errors.Is(err, stock.ErrConflict):
					conflicts.Add(1)
				default:
					t.Errorf("Restock: %v", err)
				}
			})
		}
		wg.Wait()
		lv, err := m.Levels(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case five.Load() == 12 && seven.Load() == 0 && conflicts.Load() == 12 && lv.Available == 5:
		case seven.Load() == 12 && five.Load() == 0 && conflicts.Load() == 12 && lv.Available == 7:
		default:
			t.Fatalf("5-unit nil %d, 7-unit nil %d, conflicts %d, available %d; want one count applied once, the other 12 calls ErrConflict",
				five.Load(), seven.Load(), conflicts.Load(), lv.Available)
		}
	})
}

// The same order ID raced with two different item sets: one takes, the
// other is ErrConflict; stock is taken once.
func TestZZConcurrentConflictingDeducts(t *testing.T) {
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		zzSale(t, m, stock.Listing{SKU: "a", Units: 100})
		zzSale(t, m, stock.Listing{SKU: "b", Units: 100})
		var wantHeld int64
		for round := range 5 {
			func() {
				id := fmt.Sprintf("o%d", round)
				var wg sync.WaitGroup
				var okA, okB, conf atomic.Int64
				defer func() {
					if okA.Load() > 0 {
						wantHeld += 3
					} else {
						wantHeld += 4
					}
				}()
				for i := range 16 {
					wg.Go(func() {
						o := zzOrder(id, "u1", zzItem("a", 2), zzItem("b", 1))
						if i%2 == 1 {
							o = zzOrder(id, "u1", zzItem("b", 3), zzItem("a", 1))
						}
						err := zzRetry(func() error { return m.Deduct(ctx, o) })
						switch {
						case err == nil && i%2 == 0:
							okA.Add(1)
						case err == nil:
							okB.Add(1)
						case errors.Is(err, stock.ErrConflict):
							conf.Add(1)
						default:
							t.Errorf("Deduct: %v", err)
						}
					})
				}
				wg.Wait()
				if !((okA.Load() == 8 && okB.Load() == 0) || (okB.Load() == 8 && okA.Load() == 0)) || conf.Load() != 8 {
					t.Fatalf("round %d: first set ok %d, second ok %d, conflicts %d", round, okA.Load(), okB.Load(), conf.Load())
				}
			}()
		}
		la, _ := m.Levels(ctx, "a")
		lb, _ := m.Levels(ctx, "b")
		if la.Available+la.Held != 100 || lb.Available+lb.Held != 100 || la.Held+lb.Held != wantHeld {
			t.Fatalf("levels a %+v b %+v: the 5 orders must hold %d", la, lb, wantHeld)
		}
	})
}

// At the deadline, reclaimers, Reverts, late Confirms and RevertHeld race
// over multi-SKU orders: each order's units come back exactly once, and
// nothing is sold.
func TestZZExpiredOrdersRaceEveryReturnPath(t *testing.T) {
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		const orders = 30
		for _, s := range []string{"a", "b", "c"} {
			zzSale(t, m, stock.Listing{SKU: s, Units: 1000, PerUserLimit: 100, HoldTTL: time.Minute})
		}
		for i := range orders {
			o := zzOrder(fmt.Sprintf("o%d", i), fmt.Sprintf("u%d", i%3), zzItem("a", 2), zzItem("b", 1), zzItem("c", 3))
			zzIs(t, zzRetry(func() error { return m.Deduct(ctx, o) }), nil, "Deduct")
		}
		clock.Advance(time.Minute)
		var wg sync.WaitGroup
		r := m.(stock.Reclaimer)
		for range 2 {
			wg.Go(func() {
				for {
					var got []stock.Reclaimed
					err := zzRetry(func() error { var err error; got, err = r.ReclaimExpired(ctx, 4); return err })
					if err != nil {
						t.Errorf("ReclaimExpired: %v", err)
						return
					}
					if len(got) == 0 {
						return
					}
				}
			})
		}
		hr, _ := m.(stock.HoldReverter)
		for i := range orders {
			id := fmt.Sprintf("o%d", i)
			wg.Go(func() {
				if err := zzRetry(func() error { return m.Revert(ctx, id) }); err != nil {
					t.Errorf("Revert %s: %v", id, err)
				}
			})
			wg.Go(func() {
				if err := zzRetry(func() error { return m.Confirm(ctx, id) }); !errors.Is(err, stock.ErrHoldExpired) {
					t.Errorf("Confirm %s past the deadline: %v", id, err)
				}
			})
			if hr != nil {
				wg.Go(func() {
					if err := zzRetry(func() error { _, err := hr.RevertHeld(ctx, id); return err }); err != nil {
						t.Errorf("RevertHeld %s: %v", id, err)
					}
				})
			}
		}
		wg.Wait()
		for _, s := range []string{"a", "b", "c"} {
			zzWant(t, m, s, 1000, 0, 0)
		}
		if rd, ok := m.(stock.OrderReader); ok {
			for u := range 3 {
				for _, s := range []string{"a", "b", "c"} {
					n, err := rd.UserUnits(ctx, s, fmt.Sprintf("u%d", u))
					if err != nil || n != 0 {
						t.Fatalf("UserUnits(%s, u%d) = %d, %v; want 0", s, u, n, err)
					}
				}
			}
		}
	})
}
