package redisstock_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// skewedStores is two Stores on one Cluster prefix whose clocks differ by
// skew (the second ahead), so that the attempts of one slot batch and of
// consecutive batches have nows out of order.
type skewedStores struct {
	fx     *fixture
	s2     *redisstock.Store
	clock2 *stocktest.Clock
}

func newSkewedStores(t *testing.T, fx *fixture, skew time.Duration, keep time.Duration) *skewedStores {
	fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: keep})
	c2 := stocktest.NewClock(fx.clock.Now().Add(skew))
	s2 := newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: c2, Retention: keep})
	return &skewedStores{fx: fx, s2: s2, clock2: c2}
}

func (q *skewedStores) elapse(d time.Duration) {
	q.clock2.Advance(d)
	elapse(q.fx, d)
}

// checkSKUs checks, after reclaim passes by the first Store's clock, that
// every SKU's counts add up to its units, that HeldOrders and Snapshot
// list each live hold once, with what the counts hold, none past the
// reclaimer's now (checkHolds), and that nothing is reported lost.
func (q *skewedStores) checkSKUs(t *testing.T, units map[string]int64, what string) {
	t.Helper()
	fx := q.fx
	for sku, total := range units {
		lv, err := fx.s.Levels(fx.ctx(), sku)
		if err != nil {
			t.Fatal(err)
		}
		if lv.Available+lv.Held+lv.Sold != total {
			t.Fatalf("%s: %s available/held/sold %d/%d/%d, do not add up to %d", what, sku, lv.Available, lv.Held, lv.Sold, total)
		}
		checkHolds(t, fx, sku)
		sn, err := fx.s.Snapshot(fx.ctx(), []redisstock.SnapshotRequest{{SKU: sku}})
		if err != nil {
			t.Fatal(err)
		}
		if sn[0].Held != lv.Held || len(sn[0].Lost) != 0 {
			t.Fatalf("%s: %s: Snapshot held %d (Levels %d), Lost %q", what, sku, sn[0].Held, lv.Held, sn[0].Lost)
		}
	}
}

// Orders of one SKU and of three SKUs of one slot (one slot group: the
// hot script's shape), through two Stores whose clocks differ, in
// concurrent batches, with own hold times, ID reuse after Retention,
// Confirms, Reverts, partial reverts and extensions, the clocks moving on
// and reclaim passes between: the counts always add up, every live hold
// is listed once by HeldOrders and Snapshot, and after the passes none is
// past its deadline.
func TestRandomSlotBatchRoundsOnTwoSkewedStores(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		q := newSkewedStores(t, fx, 20*time.Second, redisstock.MinRetention)
		skus := sameSlot(3)
		units := map[string]int64{}
		for i, sku := range skus {
			if err := fx.s.PutOnSale(fx.ctx(), stock.Listing{SKU: sku, Units: 100000, PerUserLimit: 0,
				HoldTTL: time.Duration(30+30*i) * time.Second, MaxHoldTTL: 10 * time.Minute}); err != nil {
				t.Fatal(err)
			}
			units[sku] = 100000
		}
		r := rand.New(rand.NewPCG(3, 5))
		type live struct {
			id    string
			store int
			items []stock.Item
		}
		var lives []live
		var ended []string // IDs free again after Retention
		seq := 0
		for round := range 60 {
			var wg sync.WaitGroup
			var mu sync.Mutex
			n := 2 + r.IntN(12)
			for range n {
				seq++
				id := fmt.Sprintf("o%04d", seq)
				if len(ended) > 0 && r.IntN(3) == 0 {
					k := r.IntN(len(ended))
					id = ended[k]
					ended = slices.Delete(ended, k, k+1)
				}
				var items []stock.Item
				switch r.IntN(3) {
				case 0:
					items = []stock.Item{it(skus[0], 1+int64(r.IntN(2)))}
				case 1:
					items = []stock.Item{it(skus[0], 1), it(skus[1], 1+int64(r.IntN(2)))}
				default:
					items = []stock.Item{it(skus[0], 1), it(skus[1], 1), it(skus[2], 2)}
				}
				o := stock.Order{ID: id, UserID: "u" + id, Items: items}
				if r.IntN(3) == 0 {
					o.HoldTTL = time.Duration(5+r.IntN(300)) * time.Second
				}
				st := r.IntN(2)
				s := fx.s
				if st == 1 {
					s = q.s2
				}
				wg.Go(func() {
					err := s.Deduct(fx.ctx(), o)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						lives = append(lives, live{id, st, items})
					case errors.Is(err, stock.ErrConflict), errors.Is(err, stock.ErrOrderClosed), errors.Is(err, stock.ErrHoldExpired):
						// an ID still read (its Retention not over)
					default:
						t.Errorf("round %d: Deduct %s: %v", round, id, err)
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			// Some of the live orders end or change.
			var keep []live
			for _, l := range lives {
				s, now := fx.s, fx.clock.Now()
				if l.store == 1 {
					s, now = q.s2, q.clock2.Now()
				}
				gone := func(err error) bool {
					return errors.Is(err, stock.ErrHoldExpired) || errors.Is(err, stock.ErrUnknownOrder) || errors.Is(err, stock.ErrOrderClosed)
				}
				switch r.IntN(8) {
				case 0:
					if err := s.Confirm(fx.ctx(), l.id); err != nil && !gone(err) {
						t.Fatalf("Confirm %s: %v", l.id, err)
					}
					ended = append(ended, l.id)
					continue
				case 1:
					if err := s.Revert(fx.ctx(), l.id); err != nil && !gone(err) {
						t.Fatalf("Revert %s: %v", l.id, err)
					}
					ended = append(ended, l.id)
					continue
				case 2:
					err := s.ExtendHold(fx.ctx(), l.id, now.Add(time.Duration(1+r.IntN(400))*time.Second))
					if err != nil && !gone(err) && !errors.Is(err, stock.ErrHoldTooLong) {
						t.Fatalf("ExtendHold %s: %v", l.id, err)
					}
				case 3:
					last := l.items[len(l.items)-1]
					err := s.RevertItems(fx.ctx(), rt(fmt.Sprintf("r%d-%s", round, l.id), l.id, it(last.SKU, 1)))
					if err != nil && !gone(err) && !errors.Is(err, stock.ErrExceedsOrder) {
						t.Fatalf("RevertItems %s: %v", l.id, err)
					}
				}
				keep = append(keep, l)
			}
			lives = keep
			q.elapse(time.Duration(r.IntN(40000)) * time.Millisecond)
			if r.IntN(4) == 0 {
				for range 10 {
					if len(fx.reclaim()) == 0 {
						break
					}
				}
				q.checkSKUs(t, units, fmt.Sprintf("round %d", round))
			}
		}
		q.elapse(11 * time.Minute)
		for range 20 {
			if len(fx.reclaim()) == 0 {
				break
			}
		}
		q.checkSKUs(t, units, "at the end")
		for _, sku := range skus {
			lv, err := fx.s.Levels(fx.ctx(), sku)
			if err != nil {
				t.Fatal(err)
			}
			if lv.Held != 0 {
				t.Fatalf("%s: %d held after every deadline passed", sku, lv.Held)
			}
		}
	})
}
