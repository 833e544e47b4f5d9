package stocktest

import (
	"cmp"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// saleMax puts sku on sale with a hold time and a maximum hold time.
func (e *env) saleMax(sku string, units int64, hold, maxHold time.Duration) {
	e.t.Helper()
	l := stock.Listing{SKU: sku, Units: units, HoldTTL: hold, MaxHoldTTL: maxHold}
	if err := e.m.PutOnSale(e.ctx(), l); err != nil {
		e.t.Fatalf("PutOnSale(%+v): %v", l, err)
	}
}

// extender returns the backend's stock.HoldExtender, or nil after logging
// that it has none.
func (e *env) extender() stock.HoldExtender {
	x, ok := e.m.(stock.HoldExtender)
	if !ok {
		e.t.Logf("%T does not implement stock.HoldExtender; nothing to check", e.m)
	}
	return x
}

// wantDeadline checks an order's deadline where the backend reports it.
func (e *env) wantDeadline(id string, want time.Time) {
	e.t.Helper()
	if in, ok := e.info(id); ok && !in.Deadline.Equal(want) {
		e.t.Fatalf("order %s: deadline %v, want %v", id, in.Deadline, want)
	}
}

func held(id string, hold time.Duration, items ...stock.Item) stock.Order {
	return stock.Order{ID: id, Items: items, HoldTTL: hold}
}

// An order may ask for its own hold time, within its SKUs' maximum; a
// held order's deadline may be pushed out, within the same bound.
func init() {
	register("OrderHoldTTLSetsTheDeadline", func(e *env) {
		t0 := e.clock.Now()
		e.saleMax("a", 10, time.Minute, 10*time.Minute)
		e.saleMax("b", 10, 2*time.Minute, 5*time.Minute)
		e.sale("c", 10, 0, time.Minute)
		if lv := e.levels("a"); lv.HoldTTL != time.Minute || lv.MaxHoldTTL != 10*time.Minute {
			e.t.Fatalf("Levels(a) hold %v, max %v; want 1m0s, 10m0s", lv.HoldTTL, lv.MaxHoldTTL)
		}
		if lv := e.levels("c"); lv.MaxHoldTTL != time.Minute {
			e.t.Fatalf("Levels(c) max hold %v; want the hold time 1m0s when none is set", lv.MaxHoldTTL)
		}
		e.mustDeduct(held("short", 30*time.Second, item("a", 1)))
		e.mustDeduct(held("long", 4*time.Minute, item("a", 1), item("b", 1)))
		e.mustDeduct(held("plain", 0, item("a", 1), item("b", 1)))
		e.wantDeadline("short", t0.Add(30*time.Second))
		e.wantDeadline("long", t0.Add(4*time.Minute))
		e.wantDeadline("plain", t0.Add(time.Minute))
		// Past the shortest maximum of the order's SKUs: refused, naming the
		// line, with nothing taken.
		err := e.deduct(held("toolong", 6*time.Minute, item("a", 1), item("b", 1)))
		e.is(err, stock.ErrHoldTooLong, "Deduct with a hold past b's maximum")
		var se *stock.SKUError
		if !errors.As(err, &se) || se.SKU != "b" {
			e.t.Fatalf("Deduct past b's maximum: %v, want a *stock.SKUError naming b", err)
		}
		e.is(e.deduct(held("toolong2", 11*time.Minute, item("a", 1))), stock.ErrHoldTooLong, "Deduct past a's maximum")
		e.is(e.deduct(held("c-long", 2*time.Minute, item("c", 1))), stock.ErrHoldTooLong, "Deduct longer than a SKU without a maximum")
		e.mustDeduct(held("c-short", 30*time.Second, item("c", 1)))
		e.want("a", 7, 3, 0)
		e.want("b", 8, 2, 0)
		e.want("c", 9, 1, 0)
		// HoldTTL is not part of the identity: the first deadline stands.
		e.mustDeduct(held("short", 5*time.Minute, item("a", 1)))
		e.wantDeadline("short", t0.Add(30*time.Second))
		e.want("a", 7, 3, 0)
		for _, d := range []time.Duration{-time.Second, 500 * time.Microsecond, stock.MaxHoldTTL + time.Millisecond} {
			e.is(e.deduct(held("bad", d, item("a", 1))), stock.ErrInvalid, "Deduct with HoldTTL "+d.String())
		}
		e.is(e.m.PutOnSale(e.ctx(), stock.Listing{SKU: "d", Units: 1, HoldTTL: time.Minute, MaxHoldTTL: 30 * time.Second}),
			stock.ErrInvalid, "PutOnSale with a maximum below the hold time")
		e.is(e.m.PutOnSale(e.ctx(), stock.Listing{SKU: "d", Units: 1, MaxHoldTTL: time.Minute}),
			stock.ErrInvalid, "PutOnSale with a maximum below the default hold time")

		// Each order expires at its own deadline, all lines together.
		e.clock.Advance(30 * time.Second)
		got := sortedReclaimed(e.reclaimAll())
		if len(got) != 2 || got[0].OrderID != "c-short" || got[1].OrderID != "short" {
			e.t.Fatalf("reclaimed %+v at 30s, want c-short and short", got)
		}
		e.clock.Advance(30 * time.Second)
		if got := sortedReclaimed(e.reclaimAll()); len(got) != 2 || got[0].OrderID != "plain" || got[1].OrderID != "plain" {
			e.t.Fatalf("reclaimed %+v at 1m, want both lines of plain", got)
		}
		e.clock.Advance(2*time.Minute + 59*time.Second)
		if got := e.reclaimAll(); len(got) != 0 {
			e.t.Fatalf("reclaimed %+v before long's deadline", got)
		}
		e.is(e.confirmR("long"), nil, "Confirm just before the order's own deadline")
		e.want("a", 9, 0, 1)
		e.want("b", 9, 0, 1)
		e.want("c", 10, 0, 0)
	})

	register("ExtendHoldMovesTheDeadline", func(e *env) {
		x := e.extender()
		if x == nil {
			return
		}
		t0 := e.clock.Now()
		e.saleMax("a", 10, time.Minute, 5*time.Minute)
		e.mustDeduct(order("paid", "u1", item("a", 1)))
		e.mustDeduct(order("late", "u1", item("a", 1)))
		e.clock.Advance(50 * time.Second)
		for _, id := range []string{"paid", "late"} {
			e.is(x.ExtendHold(e.ctx(), id, t0.Add(3*time.Minute)), nil, "ExtendHold("+id+")")
		}
		e.wantDeadline("late", t0.Add(3*time.Minute))
		// The reclaimer honours the new deadline; Confirm does too.
		e.clock.Advance(70 * time.Second)
		if got := e.reclaimAll(); len(got) != 0 {
			e.t.Fatalf("reclaimed %+v at the old deadline", got)
		}
		e.is(e.m.Confirm(e.ctx(), "paid"), nil, "Confirm after the old deadline")
		e.is(x.ExtendHold(e.ctx(), "paid", t0.Add(4*time.Minute)), stock.ErrOrderConfirmed, "ExtendHold of a confirmed order")
		e.want("a", 8, 1, 1)
		e.clock.Advance(time.Minute) // t0+3m: late's new deadline
		e.is(x.ExtendHold(e.ctx(), "late", t0.Add(4*time.Minute)), stock.ErrHoldExpired, "ExtendHold at the deadline")
		if got := e.reclaimAll(); len(got) != 1 || got[0].OrderID != "late" {
			e.t.Fatalf("reclaimed %+v at the new deadline, want late", got)
		}
		e.want("a", 9, 0, 1)
		e.wantUser("a", "u1", 1)
		e.is(x.ExtendHold(e.ctx(), "late", t0.Add(4*time.Minute)), stock.ErrHoldExpired, "ExtendHold of an expired order")
		e.is(x.ExtendHold(e.ctx(), "never", t0.Add(4*time.Minute)), stock.ErrUnknownOrder, "ExtendHold of an unknown order")
		e.is(x.ExtendHold(e.ctx(), "bad}", t0.Add(4*time.Minute)), stock.ErrInvalid, "ExtendHold with an invalid ID")
		e.mustDeduct(order("gone", "", item("a", 1)))
		e.is(e.m.Revert(e.ctx(), "gone"), nil, "Revert")
		e.is(x.ExtendHold(e.ctx(), "gone", e.clock.Now().Add(2*time.Minute)), stock.ErrOrderClosed, "ExtendHold of a reverted order")
		e.mustDeduct(order("due", "", item("a", 1)))
		e.clock.Advance(time.Minute)
		e.is(x.ExtendHold(e.ctx(), "due", e.clock.Now().Add(time.Minute)), stock.ErrHoldExpired, "ExtendHold of a due hold not yet reclaimed")
		e.reclaimAll()
		e.want("a", 9, 0, 1)
	})

	register("ExtendHoldIsBoundedAndOnlyGrows", func(e *env) {
		x := e.extender()
		if x == nil {
			return
		}
		e.saleMax("a", 10, time.Minute, 5*time.Minute)
		e.saleMax("b", 10, time.Minute, 2*time.Minute)
		e.clock.Advance(time.Second)
		t0 := e.clock.Now()
		e.mustDeduct(order("o1", "", item("a", 1)))
		e.mustDeduct(order("o2", "", item("a", 1), item("b", 1)))
		e.mustDeduct(held("o3", 10*time.Second, item("a", 1)))
		// The bound is the Deduct's time plus the order's SKUs' shortest
		// maximum, as they were then: relisting with a shorter one does not
		// shrink it.
		e.saleMax("a", 7, time.Minute, time.Minute)
		e.is(x.ExtendHold(e.ctx(), "o1", t0.Add(5*time.Minute+time.Millisecond)), stock.ErrHoldTooLong, "ExtendHold past the bound")
		e.wantDeadline("o1", t0.Add(time.Minute))
		e.is(x.ExtendHold(e.ctx(), "o1", t0.Add(5*time.Minute)), nil, "ExtendHold to the bound")
		e.wantDeadline("o1", t0.Add(5*time.Minute))
		// An earlier deadline, or the same one, changes nothing.
		e.is(x.ExtendHold(e.ctx(), "o1", t0.Add(2*time.Minute)), nil, "ExtendHold to an earlier deadline")
		e.is(x.ExtendHold(e.ctx(), "o1", t0.Add(5*time.Minute)), nil, "ExtendHold repeated")
		e.wantDeadline("o1", t0.Add(5*time.Minute))
		e.is(x.ExtendHold(e.ctx(), "o2", t0.Add(3*time.Minute)), stock.ErrHoldTooLong, "ExtendHold past b's maximum")
		e.is(x.ExtendHold(e.ctx(), "o2", t0.Add(2*time.Minute)), nil, "ExtendHold of a two-line order")
		e.is(x.ExtendHold(e.ctx(), "o3", t0.Add(4*time.Minute)), nil, "ExtendHold of an order with its own hold time")
		e.want("a", 7, 3, 0)
		e.clock.Advance(2 * time.Minute)
		if got := sortedReclaimed(e.reclaimAll()); len(got) != 2 || got[0].OrderID != "o2" || got[1].OrderID != "o2" {
			e.t.Fatalf("reclaimed %+v at 2m, want both lines of o2", got)
		}
		e.clock.Advance(2 * time.Minute)
		if got := e.reclaimAll(); len(got) != 1 || got[0].OrderID != "o3" {
			e.t.Fatalf("reclaimed %+v at 4m, want o3", got)
		}
		e.clock.Advance(time.Minute)
		if got := e.reclaimAll(); len(got) != 1 || got[0].OrderID != "o1" {
			e.t.Fatalf("reclaimed %+v at 5m, want o1", got)
		}
		e.want("a", 10, 0, 0)
		e.want("b", 10, 0, 0)
	})

	register("ExtendHoldAfterAPartialRevert", func(e *env) {
		x, pr := e.extender(), e.partial()
		if x == nil || pr == nil {
			return
		}
		t0 := e.clock.Now()
		e.saleMax("a", 10, time.Minute, 3*time.Minute)
		e.mustDeduct(order("o1", "u1", item("a", 4)))
		e.is(pr.RevertItems(e.ctx(), ret("r1", "o1", item("a", 3))), nil, "RevertItems")
		e.is(x.ExtendHold(e.ctx(), "o1", t0.Add(3*time.Minute)), nil, "ExtendHold")
		e.clock.Advance(2 * time.Minute)
		if got := e.reclaimAll(); len(got) != 0 {
			e.t.Fatalf("reclaimed %+v before the extended deadline", got)
		}
		e.clock.Advance(time.Minute)
		got := e.reclaimAll()
		if len(got) != 1 || got[0] != (stock.Reclaimed{OrderID: "o1", UserID: "u1", SKU: "a", Qty: 1}) {
			e.t.Fatalf("reclaimed %+v, want o1 a 1 (what the return left)", got)
		}
		e.want("a", 10, 0, 0)
		e.wantUser("a", "u1", 0)
	})

	register("ConcurrentExtendHoldsRaceConfirmAndReclaim", func(e *env) {
		x := e.extender()
		if x == nil {
			return
		}
		const orders = 20
		t0 := e.clock.Now()
		e.saleMax("a", 100, time.Minute, 10*time.Minute)
		for i := range orders {
			e.mustDeduct(order(oid("o", i), "", item("a", 2)))
		}
		e.clock.Advance(59 * time.Second)
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			extended = map[string]bool{}
		)
		for i := range orders {
			id := oid("o", i)
			wg.Add(2)
			go func() {
				defer wg.Done()
				err := retry(func() error { return x.ExtendHold(e.ctx(), id, t0.Add(5*time.Minute)) })
				switch {
				case err == nil:
					mu.Lock()
					extended[id] = true
					mu.Unlock()
				case errors.Is(err, stock.ErrOrderConfirmed):
				default:
					e.t.Errorf("ExtendHold(%s): %v", id, err)
				}
			}()
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					if err := e.confirmR(id); err != nil {
						e.t.Errorf("Confirm(%s): %v", id, err)
					}
				}
			}()
		}
		wg.Wait()
		e.clock.Advance(2 * time.Second) // past the first deadline, before the extended one
		got := e.reclaimAll()
		confirmed := orders / 2
		for i := 1; i < orders; i += 2 {
			if !extended[oid("o", i)] {
				e.t.Fatalf("ExtendHold of unconfirmed order %s did not apply", oid("o", i))
			}
		}
		if len(got) != 0 {
			e.t.Fatalf("reclaimed %+v: every unconfirmed hold was extended", got)
		}
		e.want("a", 100-2*orders, 2*(orders-int64(confirmed)), 2*int64(confirmed))
		e.clock.Advance(5 * time.Minute)
		if got := e.reclaimAll(); len(got) != orders-confirmed {
			e.t.Fatalf("reclaimed %d lines after the extended deadline, want %d", len(got), orders-confirmed)
		}
		e.want("a", 100-2*int64(confirmed), 0, 2*int64(confirmed))
	})
}

// sortedReclaimed sorts reclaim reports by order and SKU.
func sortedReclaimed(got []stock.Reclaimed) []stock.Reclaimed {
	slices.SortFunc(got, func(a, b stock.Reclaimed) int {
		return cmp.Or(cmp.Compare(a.OrderID, b.OrderID), cmp.Compare(a.SKU, b.SKU))
	})
	return got
}
