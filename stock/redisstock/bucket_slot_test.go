package redisstock_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A SKU split into buckets on a Cluster, its orders taken in slot batches:
// a sold-out bucket is refilled from the others, so
// exactly the units on sale are held; refusals (sold out, limit, hold too
// long, need user) name the SKU, never a bucket; HeldOrders, Snapshot,
// Audit and the reclaimer see each hold once, under the SKU, and
// the reclaimer returns every one at its deadline.
func TestBucketedSlotHoldsCountOnceUnderTheSKU(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		const units = 8
		if err := fx.s.PutOnSale(fx.ctx(), stock.Listing{SKU: "h", Units: units, PerUserLimit: 2, Buckets: 4,
			HoldTTL: time.Minute, MaxHoldTTL: 5 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		named := func(err error, target error, what string) {
			t.Helper()
			var se *stock.SKUError
			if !errors.Is(err, target) || !errors.As(err, &se) || se.SKU != "h" {
				t.Fatalf("%s: %v, want %v naming h", what, err, target)
			}
		}
		o := ord("long", "u98", it("h", 1))
		o.HoldTTL = 10 * time.Minute
		named(fx.s.Deduct(fx.ctx(), o), stock.ErrHoldTooLong, "Deduct past the longest hold")
		err := fx.s.Deduct(fx.ctx(), ord("anon", "", it("h", 1)))
		var se *stock.SKUError
		if !errors.As(err, &se) || se.SKU != "h" || !errors.Is(err, stock.ErrInvalid) {
			t.Fatalf("Deduct without a user: %v, want ErrInvalid naming h", err)
		}
		var ids []string
		for i := range units {
			id := fmt.Sprintf("o%d", i)
			is(t, fx.s.Deduct(fx.ctx(), ord(id, fmt.Sprintf("u%d", i), it("h", 1))), nil, "Deduct "+id)
			ids = append(ids, id)
		}
		named(fx.s.Deduct(fx.ctx(), ord("late", "u99", it("h", 1))), stock.ErrSoldOut, "Deduct past the units")
		fx.want("h", 0, units, 0)
		held, err := fx.s.HeldOrders(fx.ctx(), "h")
		if err != nil || len(held) != units {
			t.Fatalf("HeldOrders = %+v, %v; want %d holds", held, err, units)
		}
		for _, h := range held {
			if h.SKU != "h" || h.Qty != 1 {
				t.Fatalf("HeldOrders %+v: want each of h, 1 unit", held)
			}
		}
		sn, err := fx.s.Snapshot(fx.ctx(), []redisstock.SnapshotRequest{{SKU: "h"}})
		if err != nil || len(sn[0].Holds) != units || len(sn[0].Lost) != 0 || sn[0].Held != units {
			t.Fatalf("Snapshot = %+v, %v", sn, err)
		}
		if orphans, _, err := fx.s.Audit(fx.ctx()); err != nil || len(orphans) != 0 {
			t.Fatalf("Audit = %q, %v", orphans, err)
		}
		// A Revert gives a unit back to its bucket; a limit refusal names h.
		is(t, fx.s.Revert(fx.ctx(), "o0"), nil, "Revert o0")
		is(t, fx.s.Revert(fx.ctx(), "o2"), nil, "Revert o2")
		is(t, fx.s.Deduct(fx.ctx(), ord("u1b", "u1", it("h", 1))), nil, "Deduct u1's second")
		named(fx.s.Deduct(fx.ctx(), ord("u1c", "u1", it("h", 1))), stock.ErrLimitReached, "Deduct u1's third")
		fx.clock.Advance(time.Minute)
		var got []string
		for range 5 {
			rs := fx.reclaim()
			for _, r := range rs {
				if r.SKU != "h" || r.Qty != 1 {
					t.Fatalf("reclaimed %+v: want h, 1 unit", r)
				}
				got = append(got, r.OrderID)
			}
			if len(rs) == 0 {
				break
			}
		}
		want := append(slices.Clone(ids[3:]), "o1", "u1b")
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("reclaimed %q, want %q", got, want)
		}
		fx.want("h", units, 0, 0)
		if orphans, _, err := fx.s.Audit(fx.ctx()); err != nil || len(orphans) != 0 {
			t.Fatalf("Audit after the passes = %q, %v", orphans, err)
		}
	})
}
