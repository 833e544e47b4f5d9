package redisstock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A pass reports fewer than limit holds only when no more are due, returns
// a hold once and a confirmed or reverted one never (ReclaimExpired): with
// orders over several SKUs (queued, in the holds zset, extended, with
// their own hold times, partly reverted, ended), passes of small limits
// that share their budget across the SKUs keep every promise.
func TestReviewQueue2SmallLimitsOverSeveralSKUs(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		const n, nsku = 80, 5
		r := rand.New(rand.NewPCG(3, 5))
		skus := make([]string, nsku)
		for i := range skus {
			skus[i] = fmt.Sprintf("s%d", i)
			fx.saleMax(skus[i], 10*n, 0, time.Duration(5+r.IntN(30))*time.Second, 10*time.Minute)
		}
		ended := map[string]bool{}    // orders confirmed or reverted
		returned := map[string]bool{} // order + "/" + SKU
		drain := func() {
			drainPasses(t, fx, skus, func() int { return 1 + r.IntN(7) }, func(g stock.Reclaimed) {
				k := g.OrderID + "/" + g.SKU
				if returned[k] {
					t.Fatalf("line %s returned twice", k)
				}
				if ended[g.OrderID] {
					t.Fatalf("ended order %s returned", g.OrderID)
				}
				returned[k] = true
			})
		}
		for i := range n {
			id := fmt.Sprintf("o%04d", i)
			a := skus[r.IntN(nsku)]
			items := []stock.Item{it(a, 2)}
			if b := skus[r.IntN(nsku)]; b != a && r.IntN(3) == 0 {
				items = append(items, it(b, 1))
			}
			o := ord(id, "", items...)
			if r.IntN(3) == 0 {
				o.HoldTTL = time.Duration(1+r.IntN(60)) * time.Second
			}
			is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct "+id)
			switch r.IntN(8) {
			case 0:
				is(t, fx.s.Confirm(fx.ctx(), id), nil, "Confirm")
				ended[id] = true
			case 1:
				is(t, fx.s.Revert(fx.ctx(), id), nil, "Revert")
				ended[id] = true
			case 2:
				_ = fx.s.ExtendHold(fx.ctx(), id, fx.clock.Now().Add(time.Duration(1+r.IntN(90))*time.Second))
			case 3:
				is(t, fx.s.RevertItems(fx.ctx(), rt("r"+id, id, it(a, 2))), nil, "RevertItems")
			case 4:
				is(t, fx.s.RevertItems(fx.ctx(), rt("r"+id, id, it(a, 1))), nil, "RevertItems")
			}
			fx.clock.Advance(time.Duration(r.IntN(700)) * time.Millisecond)
			if r.IntN(15) == 0 {
				drain()
			}
		}
		drainToEnd(t, fx, skus, 12, func() { fx.clock.Advance(15 * time.Second) }, drain)
	})
}

// The lines of one order are returned together unless limit ends the pass
// between them; the next pass returns the rest (ReclaimExpired): with the
// order queued on two SKUs and limit 1, two passes report both lines.
func TestReviewQueue2OrderOfTwoSKUsSplitByLimit(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("x", "u1", it("a", 2), it("b", 3))), nil, "Deduct")
		fx.clock.Advance(time.Minute)
		var all []stock.Reclaimed
		for range 3 {
			got, err := fx.s.ReclaimExpired(fx.ctx(), 1)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, got...)
		}
		if len(all) != 2 {
			t.Fatalf("passes of limit 1 reported %+v; want x's lines on a and b", all)
		}
		fx.want("a", 10, 0, 0)
		fx.want("b", 10, 0, 0)
	})
}

// An order ID used again after its first order ended and Retention passed
// (its first hold's queue entry still waits behind a live hold): the new
// order's hold is returned at its own deadline, once, and never before.
func TestReviewQueue2ReusedOrderIDBehindALiveHold(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		endBehindLiveHold(t, fx, time.Minute, "x", 3*redisstock.MinRetention)
		is(t, fx.s.Deduct(fx.ctx(), ord("x", "u3", it("a", 2))), nil, "Deduct again")
		xdl := fx.clock.Now().Add(time.Minute)
		fx.want("a", 6, 3, 1)
		elapse(fx, time.Minute-3*redisstock.MinRetention)
		wantReclaimed(t, fx.reclaim(), "live")
		fx.want("a", 7, 2, 1)
		held, err := fx.s.HeldOrders(fx.ctx(), "a")
		if err != nil || len(held) != 1 || held[0].OrderID != "x" || !held[0].Deadline.Equal(xdl) || held[0].Qty != 2 {
			t.Fatalf("HeldOrders = %+v, %v; want x's 2 until %v", held, err, xdl)
		}
		elapse(fx, 3*redisstock.MinRetention)
		wantReclaimed(t, fx.reclaim(), "x")
		fx.want("a", 9, 0, 1)
	})
}

// Reclaimers of small limits racing with Confirms of due queued holds on
// three SKUs: a hold is returned once, a confirmed one never, and every
// other is returned.
func TestReviewQueue2ReclaimersRaceConfirms(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		const n = 240
		skus := []string{"a", "b", "c"}
		for _, sku := range skus {
			fx.sale(sku, n, 0, time.Minute)
		}
		for i := range n {
			id := fmt.Sprintf("o%03d", i)
			is(t, fx.s.Deduct(fx.ctx(), ord(id, "", it(skus[i%3], 1))), nil, "Deduct")
		}
		fx.clock.Advance(time.Minute)
		var mu sync.Mutex
		got := map[string]int{}
		confirmed := map[string]bool{}
		var wg sync.WaitGroup
		var done atomic.Bool
		wg.Go(func() {
			defer done.Store(true)
			for i := 0; i < n; i += 2 {
				id := fmt.Sprintf("o%03d", i)
				// Past the deadline Confirm returns the units itself.
				if err := fx.s.Confirm(fx.ctx(), id); err == nil {
					mu.Lock()
					confirmed[id] = true
					mu.Unlock()
				} else if !errors.Is(err, stock.ErrHoldExpired) {
					t.Error(err)
				}
			}
		})
		for k := range 3 {
			wg.Go(func() {
				for {
					last := done.Load()
					r, err := fx.s.ReclaimExpired(fx.ctx(), 1+k)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, x := range r {
						got[x.OrderID]++
					}
					mu.Unlock()
					if len(r) == 0 && last {
						return
					}
				}
			})
		}
		wg.Wait()
		for i := range n {
			id := fmt.Sprintf("o%03d", i)
			switch {
			case confirmed[id] && got[id] != 0:
				t.Fatalf("%s confirmed and returned %d times", id, got[id])
			case i%2 == 1 && got[id] != 1, got[id] > 1:
				t.Fatalf("%s returned %d times, want once", id, got[id])
			}
		}
		for _, sku := range skus {
			lv, err := fx.s.Levels(fx.ctx(), sku)
			if err != nil || lv.Held != 0 {
				t.Fatalf("%s: %+v, %v", sku, lv, err)
			}
		}
	})
}

// As TestReviewQueue2SmallLimitsOverSeveralSKUs, with a short Retention and
// order IDs used again once their first orders ended and their records
// were deleted (their hold queue entries may still wait behind live
// holds).
func TestReviewQueue2ReusedIDsAndSmallLimits(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: redisstock.MinRetention})
		const n, nsku, nid = 120, 3, 24
		r := rand.New(rand.NewPCG(9, 1))
		skus := make([]string, nsku)
		for i := range skus {
			skus[i] = fmt.Sprintf("s%d", i)
			fx.saleMax(skus[i], 10*n, 0, time.Duration(3+r.IntN(8))*time.Second, 10*time.Minute)
		}
		live := map[string]bool{}     // order IDs held now (may be due)
		returned := map[string]bool{} // order + "/" + SKU, of the live order under the ID
		drain := func() {
			drainPasses(t, fx, skus, func() int { return 1 + r.IntN(5) }, func(g stock.Reclaimed) {
				k := g.OrderID + "/" + g.SKU
				if returned[k] || !live[g.OrderID] {
					t.Fatalf("line %s returned twice, or of an ended order", k)
				}
				returned[k] = true
			})
		}
		for i := range n {
			id := fmt.Sprintf("o%02d", r.IntN(nid))
			if live[id] {
				continue
			}
			a := skus[r.IntN(nsku)]
			items := []stock.Item{it(a, 2)}
			if b := skus[r.IntN(nsku)]; b != a && r.IntN(3) == 0 {
				items = append(items, it(b, 1))
			}
			o := ord(id, fmt.Sprint("u", i), items...)
			if r.IntN(3) == 0 {
				o.HoldTTL = time.Duration(1+r.IntN(12)) * time.Second
			}
			if err := fx.s.Deduct(fx.ctx(), o); err == nil {
				live[id] = true
				for k := range returned {
					if strings.HasPrefix(k, id+"/") {
						delete(returned, k)
					}
				}
				switch r.IntN(6) {
				case 0:
					is(t, fx.s.Confirm(fx.ctx(), id), nil, "Confirm")
					live[id] = false
				case 1:
					is(t, fx.s.Revert(fx.ctx(), id), nil, "Revert")
					live[id] = false
				case 2:
					_ = fx.s.ExtendHold(fx.ctx(), id, fx.clock.Now().Add(time.Duration(1+r.IntN(20))*time.Second))
				}
			}
			elapse(fx, time.Duration(r.IntN(300))*time.Millisecond)
			if r.IntN(5) == 0 {
				drain()
				for id := range live {
					all := true
					for _, sku := range skus {
						if fx.hasRecord(sku, id) && !returned[id+"/"+sku] {
							all = false
						}
					}
					if all {
						live[id] = false
					}
				}
			}
		}
		drainToEnd(t, fx, skus, 10, func() { elapse(fx, 3*time.Second) }, drain)
	})
}

// The report survives a resend (ReclaimExpired): every reclaim script
// pipeline of a pass sent twice, over queued holds (due ones past the
// first peek's reach, ended ones among them) on two SKUs, the passes
// report each due hold once.
func TestReviewQueue2ResentReclaimReportsEveryHold(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		h := &resendHook{}
		fx.c.AddHook(h)
		const n = 100
		fx.sale("a", n, 0, time.Minute)
		fx.sale("b", n, 0, time.Minute)
		var want []string
		for i := range n {
			id := fmt.Sprintf("o%03d", i)
			is(t, fx.s.Deduct(fx.ctx(), ord(id, "", it([]string{"a", "b"}[i%2], 1))), nil, "Deduct")
			if i%7 == 3 {
				is(t, fx.s.Confirm(fx.ctx(), id), nil, "Confirm")
			} else {
				want = append(want, id)
			}
		}
		fx.clock.Advance(time.Minute)
		h.arm("stock_reclaim.lua", 1000)
		var got []stock.Reclaimed
		for _, limit := range []int{5, 40, 1000} {
			r, err := fx.s.ReclaimExpired(fx.ctx(), limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(r) != min(limit, len(want)-len(got)) {
				t.Fatalf("pass of limit %d returned %d, %d of %d due before it", limit, len(r), len(want)-len(got), len(want))
			}
			got = append(got, r...)
		}
		wantReclaimed(t, got, want...)
	})
}

// Reads never wait for replicas (Config.WaitReplicas), the reclaimer's peek
// of a hold queue included, even when the server lost its scripts (a
// restart, a failover, SCRIPT FLUSH) and the peek has to load them again:
// a pass with nothing due answers on a master whose replicas never
// acknowledge.
func TestReviewQueue2PeekAfterScriptFlushDoesNotWait(t *testing.T) {
	ctx := context.Background()
	c := waitClient(t, startMaster(t).Addr())
	cfg := redisstock.Config{Prefix: "rq2", Clock: stocktest.NewClock(stocktest.Epoch)}
	plain := newStore(t, c, cfg)
	if err := plain.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := plain.Deduct(ctx, ord("x", "", it("a", 1))); err != nil {
		t.Fatal(err)
	}
	cfg.WaitReplicas, cfg.WaitTimeout = 1, 50*time.Millisecond
	s := newStore(t, c, cfg)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReclaimExpired(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("ReclaimExpired with nothing due, scripts flushed = %+v, %v; want none, no error", got, err)
	}
}

// drainPasses runs reclaim passes of the limits limit draws, giving each
// hold returned to check, until a pass returns fewer than its limit; it
// fails if a pass returned more than its limit, or fewer while a hold of
// skus was due (ReclaimExpired: fewer than limit only when no more are
// due).
func drainPasses(t *testing.T, fx *fixture, skus []string, limit func() int, check func(stock.Reclaimed)) {
	t.Helper()
	for {
		n := limit()
		got, err := fx.s.ReclaimExpired(fx.ctx(), n)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > n {
			t.Fatalf("pass of limit %d returned %d", n, len(got))
		}
		for _, g := range got {
			check(g)
		}
		if len(got) == n {
			continue
		}
		now := fx.clock.Now()
		for _, sku := range skus {
			held, err := fx.s.HeldOrders(fx.ctx(), sku)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range held {
				if !h.Deadline.After(now) {
					t.Fatalf("pass of limit %d returned %d holds, but %s on %s is due (deadline %v, now %v)",
						n, len(got), h.OrderID, sku, h.Deadline, now)
				}
			}
		}
		return
	}
}

// drainToEnd advances the time rounds times with advance, draining after
// each, then checks that no SKU of skus holds a unit.
func drainToEnd(t *testing.T, fx *fixture, skus []string, rounds int, advance, drain func()) {
	t.Helper()
	for range rounds {
		advance()
		drain()
	}
	for _, sku := range skus {
		lv, err := fx.s.Levels(fx.ctx(), sku)
		if err != nil || lv.Held != 0 {
			t.Fatalf("%s at the end: %+v, %v; want nothing held", sku, lv, err)
		}
	}
}
