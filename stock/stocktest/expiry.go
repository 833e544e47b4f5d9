package stocktest

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// Holds expire: by the reclaimer, or by a Confirm that comes too late.
func init() {
	register("ReclaimReturnsExpiredHolds", func(e *env) {
		e.sale("a", 10, 2, time.Minute)
		e.sale("b", 10, 0, 2*time.Minute)
		e.mustDeduct(order("o1", "u1", item("a", 2)))
		e.mustDeduct(order("o2", "u2", item("a", 1), item("b", 3)))
		e.mustDeduct(order("o3", "u3", item("a", 1)))
		e.is(e.m.Confirm(e.ctx(), "o3"), nil, "Confirm")
		e.clock.Advance(59 * time.Second)
		if got := e.reclaimAll(); len(got) != 0 {
			e.t.Fatalf("reclaimed before the deadline: %+v", got)
		}
		e.clock.Advance(2 * time.Minute)
		got := e.reclaimAll()
		sort.Slice(got, func(i, j int) bool {
			return got[i].OrderID+got[i].SKU < got[j].OrderID+got[j].SKU
		})
		want := []stock.Reclaimed{
			{OrderID: "o1", UserID: "u1", SKU: "a", Qty: 2},
			{OrderID: "o2", UserID: "u2", SKU: "a", Qty: 1},
			{OrderID: "o2", UserID: "u2", SKU: "b", Qty: 3},
		}
		if len(got) != len(want) {
			e.t.Fatalf("reclaimed %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				e.t.Fatalf("reclaimed %+v, want %+v", got, want)
			}
		}
		e.want("a", 9, 0, 1)
		e.want("b", 10, 0, 0)
		// Quota came back with the units.
		e.mustDeduct(order("o4", "u1", item("a", 2)))
		// An expired order stays expired.
		e.is(e.m.Confirm(e.ctx(), "o1"), stock.ErrHoldExpired, "Confirm of reclaimed order")
		e.is(e.deduct(order("o1", "u1", item("a", 2))), stock.ErrHoldExpired, "Deduct of reclaimed order")
		e.is(e.m.Revert(e.ctx(), "o1"), nil, "Revert of reclaimed order")
		e.want("a", 7, 2, 1)
		if got := e.reclaimAll(); len(got) != 0 {
			e.t.Fatalf("reclaimed twice: %+v", got)
		}
	})

	register("LateConfirmReturnsUnits", func(e *env) {
		e.sale("a", 10, 1, time.Minute)
		e.mustDeduct(order("o1", "u1", item("a", 1)))
		e.clock.Advance(time.Minute) // the deadline is now
		e.is(e.m.Confirm(e.ctx(), "o1"), stock.ErrHoldExpired, "Confirm at the deadline")
		e.want("a", 10, 0, 0)
		if got := e.reclaimAll(); len(got) != 0 {
			e.t.Fatalf("reclaimer returned units a late Confirm already returned: %+v", got)
		}
		e.want("a", 10, 0, 0)
		e.mustDeduct(order("o2", "u1", item("a", 1)))
	})

	register("RevertBeatsReclaim", func(e *env) {
		e.sale("a", 10, 0, time.Minute)
		e.mustDeduct(order("o1", "u1", item("a", 4)))
		e.is(e.m.Revert(e.ctx(), "o1"), nil, "Revert")
		e.clock.Advance(time.Hour)
		if got := e.reclaimAll(); len(got) != 0 {
			e.t.Fatalf("reclaimed a reverted order: %+v", got)
		}
		e.want("a", 10, 0, 0)
	})

	register("ConcurrentReclaimersReturnEachHoldOnce", func(e *env) {
		const orders = 120
		e.sale("a", 1000, 0, time.Minute)
		e.sale("b", 1000, 0, 3*time.Minute)
		for i := range orders {
			items := []stock.Item{item("a", 2)}
			if i%3 == 0 {
				items = append(items, item("b", 1))
			}
			e.mustDeduct(order(oid("o", i), oid("u", i), items...))
		}
		e.clock.Advance(time.Hour)
		var (
			mu   sync.Mutex
			seen = map[string]int{}
			wg   sync.WaitGroup
		)
		for range 6 {
			wg.Go(func() {
				for {
					got, err := e.reclaimR(5)
					if err != nil {
						e.t.Errorf("ReclaimExpired: %v", err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, g := range got {
						seen[g.OrderID+"/"+g.SKU]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != orders+orders/3 {
			e.t.Fatalf("reclaimed %d lines, want %d", len(seen), orders+orders/3)
		}
		for k, n := range seen {
			if n != 1 {
				e.t.Fatalf("line %s reclaimed %d times", k, n)
			}
		}
		e.want("a", 1000, 0, 0)
		e.want("b", 1000, 0, 0)
	})

	register("ConfirmRacingReclaim", func(e *env) {
		// Every hold ends either confirmed or returned, never both: confirms
		// race reclaimers while the clock crosses the deadline.
		const orders = 60
		e.sale("a", orders, 0, time.Minute)
		for i := range orders {
			e.mustDeduct(order(oid("o", i), "", item("a", 1)))
		}
		e.clock.Advance(time.Minute - time.Millisecond)
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			confirmed = map[string]bool{}
			returned  = map[string]int{}
		)
		for w := range 3 {
			wg.Go(func() {
				for i := w; i < orders; i += 3 {
					if i == orders/2 && w == 0 {
						e.clock.Advance(time.Millisecond)
					}
					err := e.confirmR(oid("o", i))
					if err == nil {
						mu.Lock()
						confirmed[oid("o", i)] = true
						mu.Unlock()
					} else if !errors.Is(err, stock.ErrHoldExpired) {
						e.t.Errorf("Confirm: %v", err)
					}
				}
			})
		}
		for range 2 {
			wg.Go(func() {
				for range 50 {
					got, err := e.reclaimR(4)
					if err != nil {
						e.t.Errorf("ReclaimExpired: %v", err)
						return
					}
					mu.Lock()
					for _, g := range got {
						returned[g.OrderID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		e.clock.Advance(time.Hour)
		for _, g := range e.reclaimAll() {
			returned[g.OrderID]++
		}
		for id := range confirmed {
			if returned[id] != 0 {
				e.t.Fatalf("order %s was confirmed and also returned", id)
			}
		}
		sold := int64(len(confirmed))
		lv := e.levels("a")
		if lv.Sold != sold || lv.Held != 0 || lv.Available != orders-sold {
			e.t.Fatalf("levels %+v after %d confirms of %d", lv, sold, orders)
		}
	})
}
