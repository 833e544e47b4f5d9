package memstock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

func TestDiffRevertPastDeadline(t *testing.T) {
	diff(t, func(r *rec) {
		put(r, stock.Listing{SKU: "a", Units: 5, HoldTTL: time.Second})
		deduct(r, one("o1", "u", "a", 2))
		r.clock.Advance(time.Second)
		r.do("revert o1", r.m.Revert(r.ctx, "o1"))
		r.orders("o1")
		deduct(r, one("o1", "u", "a", 2))
		r.do("confirm o1", r.m.Confirm(r.ctx, "o1"))
		r.levels("a")
		r.reclaim(10)
		r.levels("a")
	})
}

func TestDiffExactDeadline(t *testing.T) {
	diff(t, func(r *rec) {
		put(r, stock.Listing{SKU: "a", Units: 5, HoldTTL: time.Second, MaxHoldTTL: time.Hour})
		deduct(r, one("o1", "u", "a", 1))
		deduct(r, one("o2", "u", "a", 1))
		deduct(r, one("o3", "u", "a", 1))
		deduct(r, one("o4", "u", "a", 1))
		r.clock.Advance(time.Second)
		r.do("confirm o1", r.m.Confirm(r.ctx, "o1"))
		r.do("extend o2", r.m.ExtendHold(r.ctx, "o2", r.clock.Now().Add(time.Minute)))
		r.do("revertitems o3", r.m.(stock.PartialReverter).RevertItems(r.ctx, stock.Return{OpID: "x", OrderID: "o3", Items: []stock.Item{{SKU: "a", Qty: 1}}}))
		deduct(r, one("o4", "u", "a", 1))
		r.orders("o1", "o2", "o3", "o4")
		r.levels("a")
		r.reclaim(10)
		r.levels("a")
		r.orders("o1", "o2", "o3", "o4")
	})
}

func TestDiffOrdersDeadlineAfterEnd(t *testing.T) {
	diff(t, func(r *rec) {
		put(r, stock.Listing{SKU: "a", Units: 5, HoldTTL: time.Second})
		deduct(r, one("o1", "u", "a", 1))
		deduct(r, one("o2", "u", "a", 1))
		deduct(r, one("o3", "u", "a", 1))
		r.do("confirm o1", r.m.Confirm(r.ctx, "o1"))
		r.do("revert o2", r.m.Revert(r.ctx, "o2"))
		r.orders("o1", "o2", "o3", "nope")
		r.clock.Advance(2 * time.Second)
		r.reclaim(10)
		r.orders("o3")
		r.do("revert o1", r.m.Revert(r.ctx, "o1"))
		r.orders("o1")
	})
}

func TestDiffRelistWithHolds(t *testing.T) {
	diff(t, func(r *rec) {
		put(r, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 5, HoldTTL: time.Minute})
		deduct(r, one("o1", "u", "a", 3))
		deduct(r, one("o2", "u", "a", 2))
		r.do("confirm o2", r.m.Confirm(r.ctx, "o2"))
		put(r, stock.Listing{SKU: "a", Units: 4, PerUserLimit: 2, HoldTTL: 2 * time.Minute})
		r.levels("a")
		r.users("a", "u")
		deduct(r, one("o3", "u", "a", 1))
		deduct(r, one("o3b", "v", "a", 2))
		r.do("revert o1", r.m.Revert(r.ctx, "o1"))
		r.do("revert o2", r.m.Revert(r.ctx, "o2"))
		r.levels("a")
		r.users("a", "u")
		r.orders("o1", "o2", "o3b")
	})
}

func TestDiffRestock(t *testing.T) {
	diff(t, func(r *rec) {
		r.do("restock unknown", r.m.Restock(r.ctx, stock.Restock{OpID: "r1", SKU: "a", Units: 3}))
		put(r, stock.Listing{SKU: "a", Units: 1})
		put(r, stock.Listing{SKU: "b", Units: 1})
		r.do("restock r1", r.m.Restock(r.ctx, stock.Restock{OpID: "r1", SKU: "a", Units: 3}))
		r.do("restock r1 again", r.m.Restock(r.ctx, stock.Restock{OpID: "r1", SKU: "a", Units: 3}))
		r.do("restock r1 other units", r.m.Restock(r.ctx, stock.Restock{OpID: "r1", SKU: "a", Units: 4}))
		r.do("restock r1 other sku", r.m.Restock(r.ctx, stock.Restock{OpID: "r1", SKU: "b", Units: 3}))
		r.do("restock r2 huge", r.m.Restock(r.ctx, stock.Restock{OpID: "r2", SKU: "a", Units: stock.MaxUnits}))
		r.levels("a")
		r.levels("b")
		put(r, stock.Listing{SKU: "a", Units: 1})
		r.do("restock r1 after relist", r.m.Restock(r.ctx, stock.Restock{OpID: "r1", SKU: "a", Units: 3}))
		r.levels("a")
	})
}

func TestDiffDeductErrors(t *testing.T) {
	diff(t, func(r *rec) {
		put(r, stock.Listing{SKU: "a", Units: 2, PerUserLimit: 1, HoldTTL: time.Second})
		put(r, stock.Listing{SKU: "b", Units: 1, HoldTTL: time.Second})
		put(r, stock.Listing{SKU: "c", Units: 5})
		deduct(r, stock.Order{ID: "n1", Items: []stock.Item{{SKU: "b", Qty: 1}, {SKU: "a", Qty: 1}}})
		deduct(r, stock.Order{ID: "n2", UserID: "u", Items: []stock.Item{{SKU: "b", Qty: 2}, {SKU: "a", Qty: 2}}})
		deduct(r, stock.Order{ID: "n3", UserID: "u", Items: []stock.Item{{SKU: "zz", Qty: 1}, {SKU: "a", Qty: 2}}})
		deduct(r, stock.Order{ID: "n4", UserID: "u", HoldTTL: time.Hour, Items: []stock.Item{{SKU: "b", Qty: 2}}})
		deduct(r, stock.Order{ID: "n5", UserID: "u", HoldTTL: time.Hour, Items: []stock.Item{{SKU: "c", Qty: 1}}})
		deduct(r, stock.Order{ID: "n6", UserID: "u", Items: []stock.Item{{SKU: "c", Qty: 1}, {SKU: "b", Qty: 1}}})
		deduct(r, stock.Order{ID: "n6", UserID: "v", Items: []stock.Item{{SKU: "c", Qty: 1}, {SKU: "b", Qty: 1}}})
		deduct(r, stock.Order{ID: "n6", Items: []stock.Item{{SKU: "c", Qty: 1}, {SKU: "b", Qty: 1}}})
		deduct(r, stock.Order{ID: "n6", UserID: "u", Items: []stock.Item{{SKU: "b", Qty: 1}, {SKU: "c", Qty: 1}}})
		deduct(r, stock.Order{ID: "n6", UserID: "u", Items: []stock.Item{{SKU: "c", Qty: 2}, {SKU: "b", Qty: 1}}})
		deduct(r, stock.Order{ID: "n7", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 1}}})
		deduct(r, stock.Order{ID: "n8", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 1}}})
		r.clock.Advance(time.Second)
		deduct(r, stock.Order{ID: "n6", UserID: "v", Items: []stock.Item{{SKU: "c", Qty: 1}, {SKU: "b", Qty: 1}}})
		deduct(r, stock.Order{ID: "n6", UserID: "u", Items: []stock.Item{{SKU: "c", Qty: 1}, {SKU: "b", Qty: 1}}})
		r.levels("a")
		r.levels("b")
		r.levels("c")
	})
}

func TestDiffBadInput(t *testing.T) {
	diff(t, func(r *rec) {
		put(r, stock.Listing{SKU: "a", Units: 2})
		bad := []string{"", "a b", "x{y}", string([]byte{0xff}), strings.Repeat("x", 129), "\u00a0"}
		for _, id := range bad {
			deduct(r, one(id, "", "a", 1))
			deduct(r, one("ok", id, "a", 1))
			deduct(r, one("ok", "", id, 1))
			r.do("confirm", r.m.Confirm(r.ctx, id))
			r.do("revert", r.m.Revert(r.ctx, id))
			r.do("extend", r.m.ExtendHold(r.ctx, id, r.clock.Now().Add(time.Second)))
			r.do("revertitems", r.m.RevertItems(r.ctx, stock.Return{OpID: id, OrderID: "ok", Items: []stock.Item{{SKU: "a", Qty: 1}}}))
			_, err := r.m.Available(r.ctx, id)
			r.do("available", err)
			r.levels(id)
			r.orders(id)
			r.orders("ok", id)
			r.users("a", id)
			r.users(id, "u")
			r.do("restock", r.m.Restock(r.ctx, stock.Restock{OpID: id, SKU: "a", Units: 1}))
			r.do("checklisting", r.m.CheckListing(r.ctx, stock.Listing{SKU: id, Units: 1}))
		}
		for _, q := range []int64{0, -1, stock.MaxQty + 1, 1 << 62} {
			deduct(r, one("q", "", "a", q))
			deduct(r, stock.Order{ID: "q2", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: q}}})
			r.do("restock", r.m.Restock(r.ctx, stock.Restock{OpID: "rq", SKU: "a", Units: q}))
			r.do("put", r.m.PutOnSale(r.ctx, stock.Listing{SKU: "a", Units: -q}))
		}
		deduct(r, stock.Order{ID: "dup", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "a", Qty: 1}}})
		deduct(r, stock.Order{ID: "empty"})
		big := stock.Order{ID: "big"}
		for i := range 65 {
			big.Items = append(big.Items, stock.Item{SKU: "s" + string(rune('A'+i)), Qty: 1})
		}
		deduct(r, big)
		r.do("revertitems empty", r.m.RevertItems(r.ctx, stock.Return{OpID: "x", OrderID: "ok"}))
		_, err := r.m.ReclaimExpired(r.ctx, 0)
		r.do("reclaim 0", err)
		r.do("checklisting neg", r.m.CheckListing(r.ctx, stock.Listing{SKU: "a", Units: -1}))
		r.do("checklisting buckets", r.m.CheckListing(r.ctx, stock.Listing{SKU: "a", Units: 1, Buckets: 4}))
		r.do("checklisting buckets 17", r.m.CheckListing(r.ctx, stock.Listing{SKU: "a", Units: 1, Buckets: 17}))
		r.levels("a")
		r.orders()
	})
}

func TestDiffCanceled(t *testing.T) {
	diff(t, func(r *rec) {
		put(r, stock.Listing{SKU: "a", Units: 2})
		deduct(r, one("o1", "", "a", 1))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r.do("put", r.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 9}))
		r.do("restock", r.m.Restock(ctx, stock.Restock{OpID: "r", SKU: "a", Units: 1}))
		r.do("deduct", r.m.Deduct(ctx, one("o2", "", "a", 1)))
		r.do("confirm", r.m.Confirm(ctx, "o1"))
		r.do("revert", r.m.Revert(ctx, "o1"))
		r.do("extend", r.m.ExtendHold(ctx, "o1", r.clock.Now().Add(time.Second)))
		r.do("revertitems", r.m.RevertItems(ctx, stock.Return{OpID: "x", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}))
		_, err := r.m.Levels(ctx, "a")
		r.do("levels", err)
		_, err = r.m.Orders(ctx, []string{"o1"})
		r.do("orders", err)
		_, err = r.m.UserUnits(ctx, "a", "u")
		r.do("userunits", err)
		_, err = r.m.ReclaimExpired(ctx, 1)
		r.do("reclaim", err)
		r.levels("a")
		r.orders("o1", "o2")
	})
}
