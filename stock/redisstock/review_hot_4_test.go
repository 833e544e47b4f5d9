package redisstock_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// Store-level differential: the same batch through a batching Store (its
// queued orders leave in one hot call) and through a Store with MaxBatch 1
// (each order alone: on a Cluster through stock_deduct.lua), on identical
// listings and history, must answer alike and leave the same counts, user
// counts and records. The batch mixes one user several times under a
// limit, own hold times (one too long), a sell-out midway, a repeat and a
// conflict.
func TestReviewHotStoreDifferential(t *testing.T) {
	run := func(t *testing.T, fx *batchFixture) {
		skus := sameSlot(3)
		x, y, blk := skus[0], skus[1], skus[2]
		ref := newStore(t, fx.c, redisstock.Config{Clock: fx.clock, MaxBatch: 1})
		stores := []*redisstock.Store{fx.s, ref}
		for _, s := range stores {
			for _, l := range []stock.Listing{
				{SKU: x, Units: 6, PerUserLimit: 3, HoldTTL: time.Minute, MaxHoldTTL: 5 * time.Minute},
				{SKU: y, Units: 5, PerUserLimit: 0, HoldTTL: 2 * time.Minute, MaxHoldTTL: 3 * time.Minute},
				{SKU: blk, Units: 10, HoldTTL: time.Minute},
			} {
				if err := s.PutOnSale(fx.ctx(), l); err != nil {
					t.Fatal(err)
				}
			}
			is(t, s.Deduct(fx.ctx(), ord("held", "u1", it(x, 1), it(y, 1))), nil, "history: held")
			is(t, s.Deduct(fx.ctx(), ord("other", "u2", it(x, 1))), nil, "history: other")
		}
		two := func(id, user string, qx, qy int64, own time.Duration) stock.Order {
			o := ord(id, user, it(x, qx), it(y, qy))
			o.HoldTTL = own
			return o
		}
		orders := []stock.Order{
			two("a1", "U", 1, 1, 0),
			two("a2", "U", 1, 1, 30*time.Second),
			two("held", "u1", 1, 1, 0), // a repeat
			two("a3", "U", 1, 1, 0),    // U's third unit of x: at its limit (3)
			two("a4", "U", 1, 1, 0),    // U past the limit of x
			two("other", "u2", 1, 1, 0),
			two("a5", "V", 1, 1, 4*time.Minute), // past y's maximum
			two("a6", "V", 1, 3, 0),             // sold out on y
			two("a7", "", 1, 1, 0),              // x needs a user
			two("a8", "W", 1, 1, 90*time.Second),
		}
		// The batching Store: every order queued behind the blockers,
		// then sent together, through the hot script.
		count := &scriptCount{n: map[string]int{}}
		fx.loadScripts()
		fx.c.AddHook(count)
		got := make([]error, len(orders))
		blockers := fx.block(blk)
		var wg sync.WaitGroup
		for i, o := range orders {
			fx.enqueue(fx.ctx(), o, i+1, &got[i], &wg)
		}
		fx.gate.open()
		wg.Wait()
		blockers()
		if count.calls(redisstock.HotScriptHash()) < 1 { // the batch (the blockers, each alone, take the lone order's script)
			t.Fatalf("%d hot script calls: the batch did not go hot", count.calls(redisstock.HotScriptHash()))
		}
		want := make([]error, len(orders))
		for i, o := range orders {
			want[i] = ref.Deduct(fx.ctx(), o)
		}
		for i := range orders {
			if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
				t.Errorf("%s: batched %v, one by one %v", orders[i].ID, got[i], want[i])
			}
		}
		for _, sku := range []string{x, y} {
			l1, err1 := fx.s.Levels(fx.ctx(), sku)
			l2, err2 := ref.Levels(fx.ctx(), sku)
			if err1 != nil || err2 != nil || l1.Available != l2.Available || l1.Held != l2.Held || l1.Sold != l2.Sold {
				t.Errorf("%s: batched %+v, one by one %+v", sku, l1, l2)
			}
			for _, u := range []string{"U", "V", "W", "u1", "u2"} {
				n1, _ := fx.s.UserUnits(fx.ctx(), sku, u)
				n2, _ := ref.UserUnits(fx.ctx(), sku, u)
				if n1 != n2 {
					t.Errorf("%s, user %s: batched %d, one by one %d", sku, u, n1, n2)
				}
			}
			for _, o := range orders {
				f1, ok1, _ := fx.s.Line(fx.ctx(), sku, o.ID)
				f2, ok2, _ := ref.Line(fx.ctx(), sku, o.ID)
				delete(f1, "at") // attempt tokens differ
				delete(f2, "at")
				if ok1 != ok2 || fmt.Sprint(f1) != fmt.Sprint(f2) {
					t.Errorf("%s's line of %s: batched %v, one by one %v", o.ID, sku, f1, f2)
				}
			}
		}
	}
	t.Run("one server", func(t *testing.T) { eachBatched(t, run) })
	t.Run("slot", func(t *testing.T) { eachSlotBatched(t, run) })
}
