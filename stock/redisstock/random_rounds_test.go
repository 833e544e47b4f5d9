package redisstock_test

import (
	"errors"
	"math/rand"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// Random rounds on one server and on a Cluster slot: concurrent Deducts
// (batched, so mostly through the hot script, on one server into the hold
// queue; repeats, the same order twice at once, lost replies, own hold
// times above and below the SKUs', a user repeated under a limit, a
// Confirm or Revert of the same ID racing the Deduct), then Confirms,
// Reverts, partial returns, extensions, clock moves and reclaim passes.
// After every round each SKU's counts must be exactly what the orders the
// Store reports take: available + held + sold is what was put on sale,
// held and sold are the held and confirmed orders' units, and each user's
// count is that user's units.
func TestRandomRoundsKeepCountsExact(t *testing.T) {
	skus := sameSlot(2) // on a Cluster, every order is of one slot: batched
	t.Run("one server", func(t *testing.T) {
		eachBatched(t, func(t *testing.T, fx *batchFixture) { randomRounds(t, fx, skus[0], skus[1]) })
	})
	t.Run("slot", func(t *testing.T) {
		eachSlotBatched(t, func(t *testing.T, fx *batchFixture) { randomRounds(t, fx, skus[0], skus[1]) })
	})
}

func randomRounds(t *testing.T, fx *batchFixture, ska, skb string) {
	{
		ctx := fx.ctx()
		listings := []stock.Listing{
			{SKU: ska, Units: 60, PerUserLimit: 6, HoldTTL: time.Minute, MaxHoldTTL: 3 * time.Minute},
			{SKU: skb, Units: 40, HoldTTL: 90 * time.Second, MaxHoldTTL: 2 * time.Minute},
		}
		for _, l := range listings {
			if err := fx.s.PutOnSale(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		seed := int64(7)
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewSource(seed))
		users := []string{"u0", "u1", "u2", "u3", ""}
		var known []stock.Order // every order sent once
		var ids []string
		nextID := 0
		ops := 0
		check := func(round int) {
			t.Helper()
			infos, err := fx.s.Orders(ctx, ids)
			if err != nil {
				t.Fatal(err)
			}
			held := map[string]int64{}
			sold := map[string]int64{}
			per := map[string]int64{} // sku + "/" + user
			// Held: line by line (a pass may return some lines of an
			// order and leave the others for the next); sold: the
			// confirmed orders (one server confirms an order whole).
			for _, l := range listings {
				hs, err := fx.s.HeldOrders(ctx, l.SKU)
				if err != nil {
					t.Fatal(err)
				}
				for _, h := range hs {
					held[l.SKU] += h.Qty
					if h.UserID != "" {
						per[l.SKU+"/"+h.UserID] += h.Qty
					}
				}
			}
			for _, in := range infos {
				if in.State != stock.StateConfirmed {
					continue
				}
				for _, item := range in.Items {
					left := item.Qty
					for _, r := range in.Returned {
						if r.SKU == item.SKU {
							left -= r.Qty
						}
					}
					sold[item.SKU] += left
					if in.UserID != "" {
						per[item.SKU+"/"+in.UserID] += left
					}
				}
			}
			for _, l := range listings {
				lv, err := fx.s.Levels(ctx, l.SKU)
				if err != nil {
					t.Fatal(err)
				}
				if lv.Available+lv.Held+lv.Sold != l.Units || lv.Held != held[l.SKU] || lv.Sold != sold[l.SKU] || lv.Available < 0 {
					t.Fatalf("round %d (%d ops), %s: available/held/sold %d/%d/%d; the orders hold %d and sold %d of %d",
						round, ops, l.SKU, lv.Available, lv.Held, lv.Sold, held[l.SKU], sold[l.SKU], l.Units)
				}
				for _, u := range users[:4] {
					n, err := fx.s.UserUnits(ctx, l.SKU, u)
					if err != nil {
						t.Fatal(err)
					}
					if n != per[l.SKU+"/"+u] {
						t.Fatalf("round %d (%d ops), %s, user %s: %d counted, the orders take %d", round, ops, l.SKU, u, n, per[l.SKU+"/"+u])
					}
				}
			}
		}
		for round := 0; round < 40; round++ {
			// Concurrent Deducts.
			var batch []stock.Order
			for range 10 {
				var o stock.Order
				if len(known) > 0 && rng.Intn(5) == 0 {
					o = known[rng.Intn(len(known))] // a repeat (maybe with another hold time)
				} else {
					nextID++
					o = stock.Order{ID: "o" + strconv.Itoa(nextID), UserID: users[rng.Intn(len(users))]}
					o.Items = []stock.Item{{SKU: ska, Qty: int64(1 + rng.Intn(3))}}
					if rng.Intn(4) == 0 {
						o.Items = append(o.Items, stock.Item{SKU: skb, Qty: int64(1 + rng.Intn(3))})
					}
					known = append(known, o)
					ids = append(ids, o.ID)
				}
				switch rng.Intn(5) {
				case 0:
					o.HoldTTL = time.Duration(10+rng.Intn(50)) * time.Second // shorter
				case 1:
					o.HoldTTL = time.Duration(60+rng.Intn(130)) * time.Second // longer, maybe too long
				}
				batch = append(batch, o)
				if rng.Intn(3) == 0 {
					batch = append(batch, o) // the same order twice at once (a retry)
				}
			}
			fx.gate.loseNext(rng.Intn(3))
			var wg sync.WaitGroup
			for _, o := range batch {
				// A Confirm or a Revert of the same ID racing the Deduct.
				switch rng.Intn(8) {
				case 0:
					wg.Go(func() { _ = fx.s.Confirm(ctx, o.ID) })
				case 1:
					wg.Go(func() { _ = fx.s.Revert(ctx, o.ID) })
				}
			}
			for _, o := range batch {
				wg.Go(func() {
					err := fx.s.Deduct(ctx, o)
					if testing.Verbose() {
						t.Logf("deduct %s %s %v own %v: %v", o.ID, o.UserID, o.Items, o.HoldTTL, err)
					}
				})
			}
			wg.Wait()
			ops += len(batch)
			check(round)
			// Settlements, extensions, time and reclaim.
			for range 8 {
				ops++
				id := ids[rng.Intn(len(ids))]
				op := rng.Intn(6)
				logf := func(f string, a ...any) {
					if testing.Verbose() {
						t.Logf("op %d %d %s: "+f, append([]any{ops, op, id}, a...)...)
					}
				}
				switch op {
				case 0:
					logf("confirm %v", fx.s.Confirm(ctx, id))
				case 1:
					logf("revert %v", fx.s.Revert(ctx, id))
				case 2:
					infos, err := fx.s.Orders(ctx, []string{id})
					if err != nil {
						t.Fatal(err)
					}
					if in := infos[0]; in.State.Takes() {
						it := in.Items[rng.Intn(len(in.Items))]
						err := fx.s.RevertItems(ctx, stock.Return{OpID: "r" + strconv.Itoa(ops), OrderID: id,
							Items: []stock.Item{{SKU: it.SKU, Qty: 1}}})
						logf("revertitems %s %v", it.SKU, err)
						if err != nil && !stock.IsBusiness(err) {
							t.Fatalf("RevertItems: %v", err)
						}
					}
				case 3:
					err := fx.s.ExtendHold(ctx, id, fx.clock.Now().Add(time.Duration(rng.Intn(150))*time.Second))
					logf("extend %v", err)
					if err != nil && !stock.IsBusiness(err) && !errors.Is(err, stock.ErrHoldTooLong) {
						t.Fatalf("ExtendHold: %v", err)
					}
				case 4:
					fx.clock.Advance(time.Duration(rng.Intn(40)) * time.Second)
				case 5:
					got, err := fx.s.ReclaimExpired(ctx, 1+rng.Intn(5))
					logf("reclaim %v %v", got, err)
					if err != nil {
						t.Fatalf("reclaim: %v", err)
					}
				}
				check(round)
			}
		}
		// Everything due comes back.
		fx.clock.Advance(10 * time.Minute)
		for range 100 {
			got, err := fx.s.ReclaimExpired(ctx, 50)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				break
			}
		}
		check(-1)
		for _, l := range listings {
			if lv, _ := fx.s.Levels(ctx, l.SKU); lv.Held != 0 {
				t.Fatalf("%s: %d held after every deadline passed and reclaim ran", l.SKU, lv.Held)
			}
		}
	}
}
