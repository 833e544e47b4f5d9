package stocktest_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Every call against an order in every state answers as memstock does.
func TestZZEveryCallInEveryStateAgrees(t *testing.T) {
	zzAgree(t, stocktest.Epoch, func(z *zzTrace) {
		ctx := z.t.Context()
		z.call("PutOnSale a", z.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 100, PerUserLimit: 50, HoldTTL: time.Minute, MaxHoldTTL: 5 * time.Minute}))
		z.call("PutOnSale b", z.m.PutOnSale(ctx, stock.Listing{SKU: "b", Units: 100, HoldTTL: time.Minute, MaxHoldTTL: 5 * time.Minute}))
		pr, _ := z.m.(stock.PartialReverter)
		x, _ := z.m.(stock.HoldExtender)
		mk := func(id string) stock.Order { return zzOrder(id, "u1", zzItem("a", 2), zzItem("b", 1)) }
		// held, confirmed, reverted, refunded, expired (not reclaimed),
		// partial (held, a line returned whole), partialc (confirmed, part returned),
		// gone (returned whole by RevertItems).
		for _, id := range []string{"held", "confirmed", "reverted", "refunded", "expired", "partial", "partialc", "gone"} {
			o := mk(id)
			if id == "expired" {
				o.HoldTTL = time.Second
			}
			z.call("Deduct "+id, z.m.Deduct(ctx, o))
		}
		z.call("Confirm confirmed", z.m.Confirm(ctx, "confirmed"))
		z.call("Revert reverted", z.m.Revert(ctx, "reverted"))
		z.call("Confirm refunded", z.m.Confirm(ctx, "refunded"))
		z.call("Revert refunded", z.m.Revert(ctx, "refunded"))
		z.call("Confirm partialc", z.m.Confirm(ctx, "partialc"))
		if pr != nil {
			z.call("RevertItems partial", pr.RevertItems(ctx, stock.Return{OpID: "p1", OrderID: "partial", Items: []stock.Item{zzItem("b", 1)}}))
			z.call("RevertItems partialc", pr.RevertItems(ctx, stock.Return{OpID: "p1", OrderID: "partialc", Items: []stock.Item{zzItem("a", 1)}}))
			z.call("RevertItems gone", pr.RevertItems(ctx, stock.Return{OpID: "p1", OrderID: "gone", Items: []stock.Item{zzItem("a", 2), zzItem("b", 1)}}))
		}
		z.clock.Advance(2 * time.Second)
		ids := []string{"held", "confirmed", "reverted", "refunded", "expired", "partial", "partialc", "gone", "never"}
		z.orders(ids...)
		z.levels("a")
		z.levels("b")
		for _, id := range ids {
			z.call("Deduct same "+id, z.m.Deduct(ctx, mk(id)))
			z.call("Deduct other items "+id, z.m.Deduct(ctx, zzOrder(id, "u1", zzItem("a", 1))))
			z.call("Deduct other user "+id, z.m.Deduct(ctx, zzOrder(id, "u2", zzItem("a", 2), zzItem("b", 1))))
			if x != nil {
				z.call("ExtendHold "+id, x.ExtendHold(ctx, id, stocktest.Epoch.Add(3*time.Minute)))
				z.call("ExtendHold past bound "+id, x.ExtendHold(ctx, id, stocktest.Epoch.Add(6*time.Minute)))
			}
			if pr != nil {
				z.call("RevertItems p1 "+id, pr.RevertItems(ctx, stock.Return{OpID: "p1", OrderID: id, Items: []stock.Item{zzItem("a", 1)}}))
				z.call("RevertItems p2 "+id, pr.RevertItems(ctx, stock.Return{OpID: "p2", OrderID: id, Items: []stock.Item{zzItem("b", 1)}}))
				z.call("RevertItems p3 too much "+id, pr.RevertItems(ctx, stock.Return{OpID: "p3", OrderID: id, Items: []stock.Item{zzItem("a", 3)}}))
				z.call("RevertItems p4 other sku "+id, pr.RevertItems(ctx, stock.Return{OpID: "p4", OrderID: id, Items: []stock.Item{zzItem("c", 1)}}))
			}
			z.orders(id)
			z.call("Confirm "+id, z.m.Confirm(ctx, id))
			z.call("Revert "+id, z.m.Revert(ctx, id))
			z.call("Confirm again "+id, z.m.Confirm(ctx, id))
			z.orders(id)
			z.levels("a")
			z.levels("b")
		}
		if rd, ok := z.m.(stock.OrderReader); ok {
			n, err := rd.UserUnits(ctx, "a", "u1")
			z.log("UserUnits a u1 = %d %s", n, zzClass(err))
		}
		z.clock.Advance(time.Hour)
		if r, ok := z.m.(stock.Reclaimer); ok {
			got, err := r.ReclaimExpired(ctx, 100)
			z.log("Reclaim = %d lines %s", len(got), zzClass(err))
		}
		z.levels("a")
		z.levels("b")
	})
}
