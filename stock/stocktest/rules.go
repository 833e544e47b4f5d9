package stocktest

import (
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// One rule for each behaviour where backends once differed: restocks by
// operation ID, one deadline per order, repeats past the deadline, another
// user under the same ID, and calls whose context ended before they began.
func init() {
	register("RestockOnceByOpID", func(e *env) {
		e.sale("a", 10, 0, 0)
		e.sale("b", 10, 0, 0)
		r := stock.Restock{OpID: "delivery-1", SKU: "a", Units: 5}
		for range 3 {
			e.is(e.m.Restock(e.ctx(), r), nil, "Restock (repeated)")
		}
		e.want("a", 15, 0, 0)
		e.is(e.m.Restock(e.ctx(), stock.Restock{OpID: "delivery-1", SKU: "a", Units: 6}), stock.ErrConflict,
			"same operation ID, other units")
		e.is(e.m.Restock(e.ctx(), stock.Restock{OpID: "delivery-1", SKU: "b", Units: 5}), stock.ErrConflict,
			"same operation ID, other SKU")
		e.want("a", 15, 0, 0)
		e.want("b", 10, 0, 0)
		e.is(e.m.Restock(e.ctx(), stock.Restock{OpID: "delivery-2", SKU: "a", Units: 5}), nil, "Restock, new ID")
		e.want("a", 20, 0, 0)
		e.is(e.m.Restock(e.ctx(), stock.Restock{OpID: "", SKU: "a", Units: 5}), stock.ErrInvalid, "Restock without an ID")
		e.is(e.m.Restock(e.ctx(), stock.Restock{OpID: "d{3}", SKU: "a", Units: 5}), stock.ErrInvalid, "Restock with a bad ID")
		// A PutOnSale in between does not make an old operation new.
		e.sale("a", 7, 0, 0)
		e.is(e.m.Restock(e.ctx(), r), nil, "Restock repeated after PutOnSale")
		e.want("a", 7, 0, 0)
	})

	register("OneDeadlinePerOrder", func(e *env) {
		e.sale("short", 10, 0, time.Minute)
		e.sale("long", 10, 0, time.Hour)
		start := e.clock.Now()
		e.mustDeduct(order("o1", "u1", item("long", 2), item("short", 1)))
		if rd, ok := e.m.(stock.OrderReader); ok {
			got, err := rd.Orders(e.ctx(), []string{"o1"})
			if err != nil {
				e.t.Fatalf("Orders: %v", err)
			}
			if want := start.Add(time.Minute); len(got) != 1 || !got[0].Deadline.Equal(want) {
				e.t.Fatalf("Orders(o1) = %+v, want one deadline %v (the shortest hold time)", got, want)
			}
		}
		e.clock.Advance(2 * time.Minute)
		// Before any reclaim: the order is over, both lines alike.
		e.is(e.deduct(order("o1", "u1", item("long", 2), item("short", 1))), stock.ErrHoldExpired,
			"repeat Deduct past the shortest deadline")
		e.is(e.m.Confirm(e.ctx(), "o1"), stock.ErrHoldExpired, "Confirm past the shortest deadline")
		got := e.reclaimAll()
		e.want("short", 10, 0, 0)
		e.want("long", 10, 0, 0)
		for _, r := range got {
			if r.OrderID != "o1" {
				e.t.Fatalf("reclaimed %+v", got)
			}
		}
		e.is(e.m.Revert(e.ctx(), "o1"), nil, "Revert of the expired order")
		e.want("short", 10, 0, 0)
		e.want("long", 10, 0, 0)
	})

	// A hold whose deadline has passed is expired, reclaimed or not: a
	// Revert of it before any reclaim returns its units once and leaves it
	// expired, so the answers of a repeat Deduct and of Confirm do not
	// change, and a later reclaim finds nothing.
	register("RevertPastTheDeadlineLeavesTheOrderExpired", func(e *env) {
		e.sale("a", 10, 1, time.Minute)
		o := order("o1", "u1", item("a", 1))
		e.mustDeduct(o)
		e.clock.Advance(time.Minute)
		e.is(e.deduct(o), stock.ErrHoldExpired, "repeat Deduct at the deadline")
		e.is(e.revertR("o1"), nil, "Revert at the deadline")
		e.want("a", 10, 0, 0)
		e.is(e.deduct(o), stock.ErrHoldExpired, "repeat Deduct after the Revert")
		e.is(e.m.Confirm(e.ctx(), "o1"), stock.ErrHoldExpired, "Confirm after the Revert")
		if inf, ok := e.info("o1"); ok && inf.State != stock.StateExpired {
			e.t.Fatalf("Orders(o1) state %v after a Revert at the deadline, want %v", inf.State, stock.StateExpired)
		}
		e.is(e.revertR("o1"), nil, "Revert again")
		if got := e.reclaimAll(); len(got) != 0 {
			e.t.Fatalf("reclaimed %+v after the Revert", got)
		}
		e.want("a", 10, 0, 0)
		e.mustDeduct(order("o2", "u1", item("a", 1))) // the user's quota came back
		e.want("a", 9, 1, 0)
	})

	register("ReclaimReturnsWholeOrderAtOneDeadline", func(e *env) {
		e.sale("short", 10, 0, time.Minute)
		e.sale("long", 10, 0, time.Hour)
		e.mustDeduct(order("o1", "u1", item("long", 2), item("short", 1)))
		e.clock.Advance(2 * time.Minute)
		got := e.reclaimAll()
		sort.Slice(got, func(i, j int) bool { return got[i].SKU < got[j].SKU })
		want := []stock.Reclaimed{
			{OrderID: "o1", UserID: "u1", SKU: "long", Qty: 2},
			{OrderID: "o1", UserID: "u1", SKU: "short", Qty: 1},
		}
		if !slices.Equal(got, want) {
			e.t.Fatalf("reclaimed %+v at the shortest deadline, want %+v", got, want)
		}
		e.want("short", 10, 0, 0)
		e.want("long", 10, 0, 0)
		e.is(e.m.Confirm(e.ctx(), "o1"), stock.ErrHoldExpired, "Confirm of the reclaimed order")
	})

	register("RepeatDeductPastDeadlineIsExpired", func(e *env) {
		e.sale("a", 10, 2, time.Minute)
		o := order("o1", "u1", item("a", 2))
		e.mustDeduct(o)
		e.clock.Advance(time.Minute) // the deadline is now
		e.is(e.deduct(o), stock.ErrHoldExpired, "repeat Deduct at the deadline, not reclaimed yet")
		lv := e.levels("a")
		if lv.Available+lv.Held != 10 || lv.Sold != 0 {
			e.t.Fatalf("levels %+v after a repeat past the deadline: it must take nothing", lv)
		}
		e.reclaimAll()
		e.want("a", 10, 0, 0)
		e.is(e.deduct(o), stock.ErrHoldExpired, "repeat Deduct after the reclaim")
		e.want("a", 10, 0, 0)
		e.mustDeduct(order("o2", "u1", item("a", 2))) // the quota came back
	})

	register("SameItemsOtherUserIsConflict", func(e *env) {
		e.sale("a", 10, 0, 0)
		e.mustDeduct(order("o1", "u1", item("a", 2)))
		e.is(e.deduct(order("o1", "u2", item("a", 2))), stock.ErrConflict, "same ID and items, another user")
		e.is(e.deduct(order("o1", "", item("a", 2))), stock.ErrConflict, "same ID and items, no user")
		e.mustDeduct(order("o2", "", item("a", 1)))
		e.is(e.deduct(order("o2", "u1", item("a", 1))), stock.ErrConflict, "same ID and items, a user added")
		e.want("a", 7, 3, 0)
	})

	register("CanceledContextWritesNothing", func(e *env) {
		e.sale("a", 10, 0, time.Minute)
		e.mustDeduct(order("held", "u1", item("a", 1)))
		e.mustDeduct(order("paid", "u1", item("a", 1)))
		e.is(e.m.Confirm(e.ctx(), "paid"), nil, "Confirm")
		ctx, cancel := context.WithCancel(e.ctx())
		cancel()
		calls := map[string]error{
			"PutOnSale": e.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 99}),
			"Restock":   e.m.Restock(ctx, stock.Restock{OpID: "late", SKU: "a", Units: 5}),
			"Deduct":    e.m.Deduct(ctx, order("new", "u1", item("a", 1))),
			"Confirm":   e.m.Confirm(ctx, "held"),
			"Revert":    e.m.Revert(ctx, "paid"),
		}
		for name, err := range calls {
			if !errors.Is(err, context.Canceled) {
				e.t.Fatalf("%s with a canceled context: error %v, want one matching context.Canceled", name, err)
			}
			if errors.Is(err, stock.ErrUnknownOutcome) || errors.Is(err, stock.ErrContention) {
				e.t.Fatalf("%s with a canceled context: %v claims a write may have happened or was contended; nothing was sent", name, err)
			}
		}
		e.want("a", 8, 1, 1)
		e.is(e.m.Revert(e.ctx(), "new"), stock.ErrUnknownOrder, "Revert of the order the canceled Deduct named")
		e.is(e.m.Restock(e.ctx(), stock.Restock{OpID: "late", SKU: "a", Units: 5}), nil, "Restock the canceled call named")
		e.want("a", 13, 1, 1)
	})

	register("HoldListerListsDueHolds", func(e *env) {
		hl, ok := e.m.(stock.HoldLister)
		if !ok {
			e.t.Logf("%T does not implement stock.HoldLister; nothing to check", e.m)
			return
		}
		e.sale("a", 10, 0, time.Minute)
		start := e.clock.Now()
		e.mustDeduct(order("first", "", item("a", 1)))
		e.clock.Advance(10 * time.Second)
		e.mustDeduct(order("paid", "", item("a", 1)))
		e.is(e.m.Confirm(e.ctx(), "paid"), nil, "Confirm")
		e.mustDeduct(order("gone", "", item("a", 1)))
		e.is(e.m.Revert(e.ctx(), "gone"), nil, "Revert")
		e.clock.Advance(10 * time.Second)
		e.mustDeduct(order("third", "", item("a", 1)))
		e.clock.Advance(10 * time.Second)
		e.mustDeduct(order("later", "", item("a", 1)))
		got, err := hl.HeldBefore(e.ctx(), start.Add(time.Minute+20*time.Second), 10)
		if err != nil {
			e.t.Fatalf("HeldBefore: %v", err)
		}
		var ids []string
		for _, in := range got {
			ids = append(ids, in.ID)
			if in.State != stock.StateHeld {
				e.t.Fatalf("HeldBefore listed %+v, which is not held", in)
			}
		}
		if want := []string{"first", "third"}; !slices.Equal(ids, want) {
			e.t.Fatalf("HeldBefore = %v, want %v (held, due by then, earliest first)", ids, want)
		}
		if !got[0].Deadline.Equal(start.Add(time.Minute)) {
			e.t.Fatalf("HeldBefore deadline %v, want %v", got[0].Deadline, start.Add(time.Minute))
		}
		if one, err := hl.HeldBefore(e.ctx(), start.Add(time.Hour), 1); err != nil || len(one) != 1 || one[0].ID != "first" {
			e.t.Fatalf("HeldBefore with limit 1 = %+v, %v; want [first]", one, err)
		}
		_, err = hl.HeldBefore(e.ctx(), start, 0)
		e.is(err, stock.ErrInvalid, "HeldBefore with limit 0")
	})
}
