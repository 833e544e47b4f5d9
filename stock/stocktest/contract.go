package stocktest

import (
	"errors"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// The order state machine, one promise per case.
func init() {
	register("PutOnSaleOverwritesRestockAdds", func(e *env) {
		e.sale("a", 10, 0, 0)
		e.want("a", 10, 0, 0)
		e.mustDeduct(order("o1", "u1", item("a", 3)))
		e.sale("a", 5, 0, 0) // warm-up overwrites available, keeps the hold
		e.want("a", 5, 3, 0)
		e.is(e.m.Restock(e.ctx(), stock.Restock{OpID: "op-3", SKU: "a", Units: 4}), nil, "Restock")
		e.want("a", 9, 3, 0)
		lv := e.levels("a")
		if lv.HoldTTL != stock.DefaultHoldTTL || lv.PerUserLimit != 0 {
			e.t.Fatalf("settings = limit %d, hold %v; want 0, %v", lv.PerUserLimit, lv.HoldTTL, stock.DefaultHoldTTL)
		}
		e.sale("a", 9, 4, 90*time.Second)
		if lv := e.levels("a"); lv.HoldTTL != 90*time.Second || lv.PerUserLimit != 4 {
			e.t.Fatalf("settings = limit %d, hold %v; want 4, 1m30s", lv.PerUserLimit, lv.HoldTTL)
		}
	})

	register("UnknownSKUIsNotSoldOut", func(e *env) {
		_, err := e.m.Available(e.ctx(), "nope")
		e.is(err, stock.ErrUnknownSKU, "Available of unknown SKU")
		_, err = e.m.Levels(e.ctx(), "nope")
		e.is(err, stock.ErrUnknownSKU, "Levels of unknown SKU")
		e.is(e.m.Restock(e.ctx(), stock.Restock{OpID: "op-4", SKU: "nope", Units: 1}), stock.ErrUnknownSKU, "Restock of unknown SKU")
		e.sale("a", 5, 0, 0)
		err = e.deduct(order("o1", "u1", item("a", 1), item("nope", 1)))
		e.is(err, stock.ErrUnknownSKU, "Deduct naming an unknown SKU")
		if errors.Is(err, stock.ErrSoldOut) {
			e.t.Fatal("unknown SKU reported as sold out")
		}
		e.want("a", 5, 0, 0)
		e.sale("z", 0, 0, 0)
		e.is(e.deduct(order("o2", "u1", item("z", 1))), stock.ErrSoldOut, "Deduct of a SKU on sale with 0 units")
	})

	register("DeductAllOrNothing", func(e *env) {
		e.sale("a", 10, 0, 0)
		e.sale("b", 2, 0, 0)
		e.sale("c", 10, 0, 0)
		err := e.deduct(order("o1", "u1", item("a", 1), item("b", 3), item("c", 1)))
		e.is(err, stock.ErrSoldOut, "Deduct with one short line")
		var se *stock.SKUError
		if !errors.As(err, &se) || se.SKU != "b" {
			e.t.Fatalf("error %v does not name SKU b as a *stock.SKUError", err)
		}
		e.want("a", 10, 0, 0)
		e.want("b", 2, 0, 0)
		e.want("c", 10, 0, 0)
		e.is(e.m.Revert(e.ctx(), "o1"), stock.ErrUnknownOrder, "Revert of a refused order")
		e.mustDeduct(order("o2", "u1", item("c", 4), item("a", 2), item("b", 2)))
		e.want("a", 8, 2, 0)
		e.want("b", 0, 2, 0)
		e.want("c", 6, 4, 0)
	})

	register("DeductIsIdempotent", func(e *env) {
		e.sale("a", 10, 0, 0)
		e.sale("b", 10, 0, 0)
		o := order("o1", "u1", item("a", 2), item("b", 1))
		for range 3 {
			e.mustDeduct(o)
		}
		// The same items listed in another order are the same order.
		e.mustDeduct(order("o1", "u1", item("b", 1), item("a", 2)))
		e.want("a", 8, 2, 0)
		e.want("b", 9, 1, 0)
		e.is(e.m.Confirm(e.ctx(), "o1"), nil, "Confirm")
		e.mustDeduct(o)
		e.want("a", 8, 0, 2)
	})

	register("DeductConflict", func(e *env) {
		e.sale("a", 10, 0, 0)
		e.sale("b", 10, 0, 0)
		e.mustDeduct(order("o1", "u1", item("a", 2)))
		e.is(e.deduct(order("o1", "u1", item("a", 3))), stock.ErrConflict, "same ID, other quantity")
		e.is(e.deduct(order("o1", "u1", item("a", 2), item("b", 1))), stock.ErrConflict, "same ID, extra line")
		e.is(e.deduct(order("o1", "u1", item("b", 1))), stock.ErrConflict, "same ID, other SKU")
		e.want("a", 8, 2, 0)
		e.want("b", 10, 0, 0)
		e.is(e.m.Revert(e.ctx(), "o1"), nil, "Revert")
		e.want("a", 10, 0, 0)
		e.want("b", 10, 0, 0)
	})

	register("ConfirmStates", func(e *env) {
		e.sale("a", 10, 0, time.Minute)
		e.is(e.m.Confirm(e.ctx(), "ghost"), stock.ErrUnknownOrder, "Confirm of unknown order")
		e.mustDeduct(order("o1", "u1", item("a", 3)))
		e.is(e.m.Confirm(e.ctx(), "o1"), nil, "Confirm")
		e.is(e.m.Confirm(e.ctx(), "o1"), nil, "Confirm again")
		e.want("a", 7, 0, 3)
		// A confirmed sale does not expire.
		e.clock.Advance(time.Hour)
		if got := e.reclaimAll(); len(got) != 0 {
			e.t.Fatalf("reclaimed a confirmed order: %+v", got)
		}
		e.want("a", 7, 0, 3)
		e.mustDeduct(order("o2", "u1", item("a", 1)))
		e.is(e.m.Revert(e.ctx(), "o2"), nil, "Revert")
		e.is(e.m.Confirm(e.ctx(), "o2"), stock.ErrOrderClosed, "Confirm of reverted order")
		e.want("a", 7, 0, 3)
	})

	register("RevertExactlyOnce", func(e *env) {
		e.sale("a", 10, 0, 0)
		e.sale("b", 10, 0, 0)
		e.is(e.m.Revert(e.ctx(), "ghost"), stock.ErrUnknownOrder, "Revert of unknown order")
		e.want("a", 10, 0, 0)
		e.mustDeduct(order("o1", "u1", item("a", 3), item("b", 1)))
		for range 3 {
			e.is(e.m.Revert(e.ctx(), "o1"), nil, "Revert")
		}
		e.want("a", 10, 0, 0)
		e.want("b", 10, 0, 0)
		e.is(e.deduct(order("o1", "u1", item("a", 3), item("b", 1))), stock.ErrOrderClosed, "Deduct of a reverted order")
		e.want("a", 10, 0, 0)
	})

	register("RevertOfConfirmedIsRefund", func(e *env) {
		e.sale("a", 10, 2, 0)
		e.mustDeduct(order("o1", "u1", item("a", 2)))
		e.is(e.m.Confirm(e.ctx(), "o1"), nil, "Confirm")
		e.want("a", 8, 0, 2)
		e.is(e.m.Revert(e.ctx(), "o1"), nil, "Refund")
		e.is(e.m.Revert(e.ctx(), "o1"), nil, "Refund again")
		e.want("a", 10, 0, 0)
		e.is(e.m.Confirm(e.ctx(), "o1"), stock.ErrOrderClosed, "Confirm of refunded order")
		// The refund gave the user's quota back.
		e.mustDeduct(order("o2", "u1", item("a", 2)))
		e.want("a", 8, 2, 0)
	})

	register("PerUserLimit", func(e *env) {
		e.sale("a", 100, 3, 0)
		e.sale("b", 100, 0, 0)
		e.mustDeduct(order("o1", "u1", item("a", 2)))
		e.is(e.m.Confirm(e.ctx(), "o1"), nil, "Confirm")
		err := e.deduct(order("o2", "u1", item("b", 1), item("a", 2)))
		e.is(err, stock.ErrLimitReached, "Deduct past the limit (confirmed units count)")
		var se *stock.SKUError
		if !errors.As(err, &se) || se.SKU != "a" {
			e.t.Fatalf("error %v does not name SKU a", err)
		}
		e.want("b", 100, 0, 0)
		e.mustDeduct(order("o3", "u1", item("a", 1)))
		e.is(e.deduct(order("o4", "u1", item("a", 1))), stock.ErrLimitReached, "Deduct past the limit (holds count)")
		e.mustDeduct(order("o5", "u2", item("a", 3))) // another user
		e.is(e.m.Revert(e.ctx(), "o3"), nil, "Revert")
		e.mustDeduct(order("o6", "u1", item("a", 1)))
		e.want("a", 94, 4, 2)
		e.is(e.deduct(order("o7", "", item("a", 1))), stock.ErrInvalid, "Deduct without user on a limited SKU")
		e.mustDeduct(order("o8", "", item("b", 1))) // no limit, no user needed
	})

	register("InvalidInputWritesNothing", func(e *env) {
		e.sale("a", 10, 0, 0)
		bad := []stock.Order{
			order("", "u1", item("a", 1)),
			order("o{1}", "u1", item("a", 1)),
			order("o 1", "u1", item("a", 1)),
			order("o1", "u\n1", item("a", 1)),
			order("o1", "u1"),
			order("o1", "u1", item("a", 0)),
			order("o1", "u1", item("a", -1)),
			order("o1", "u1", item("a", stock.MaxQty+1)),
			order("o1", "u1", item("a", 1), item("a", 1)),
			order("o1", "u1", item("", 1)),
			order(string(make([]byte, stock.MaxIDLen+1)), "u1", item("a", 1)),
		}
		for _, o := range bad {
			e.is(e.deduct(o), stock.ErrInvalid, "Deduct of invalid order")
		}
		e.want("a", 10, 0, 0)
		e.is(e.m.Revert(e.ctx(), "o1"), stock.ErrUnknownOrder, "Revert after refused orders")
		e.is(e.m.Confirm(e.ctx(), ""), stock.ErrInvalid, "Confirm of empty ID")
		e.is(e.m.Revert(e.ctx(), "a}b"), stock.ErrInvalid, "Revert of bad ID")
		e.is(e.m.Restock(e.ctx(), stock.Restock{OpID: "op-5", SKU: "a", Units: 0}), stock.ErrInvalid, "Restock of 0")
		e.is(e.m.Restock(e.ctx(), stock.Restock{OpID: "op-6", SKU: "a", Units: -5}), stock.ErrInvalid, "Restock of -5")
		e.is(e.m.Restock(e.ctx(), stock.Restock{OpID: "op-7", SKU: "a", Units: stock.MaxUnits}), stock.ErrInvalid, "Restock past MaxUnits")
		for _, l := range []stock.Listing{
			{SKU: "", Units: 1},
			{SKU: "a", Units: -1},
			{SKU: "a", Units: stock.MaxUnits + 1},
			{SKU: "a", Units: 1, PerUserLimit: -1},
			{SKU: "a", Units: 1, HoldTTL: -time.Second},
		} {
			e.is(e.m.PutOnSale(e.ctx(), l), stock.ErrInvalid, "PutOnSale of invalid listing")
		}
		_, err := e.m.Available(e.ctx(), "{a}")
		e.is(err, stock.ErrInvalid, "Available of bad SKU")
		e.want("a", 10, 0, 0)
	})
}
