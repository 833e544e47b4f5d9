package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// sale runs buyers against the tiered flow while reconcilers run, then
// returns every unpaid hold on both sides and checks the books exactly.
// flushAt, when > 0, loses Redis's data once that many orders were placed.
func liveSale(t *testing.T, p pair, flushAt int64) {
	w := newWorld(t, p, reconcile.Config{MaxAutoFix: -1, WatchInterval: time.Millisecond, Interval: time.Hour})
	skus := map[string]int64{"hot": 60, "cold": 20}
	for sku, n := range skus {
		w.sale(sku, n)
	}
	ctx, cancel := context.WithCancel(w.ctx)
	var loops sync.WaitGroup
	loops.Add(2)
	go func() { // the scheduled reconciler, watching for a flush
		defer loops.Done()
		_ = w.rec.Run(ctx)
	}()
	var passes atomic.Int64
	repairing := make(chan struct{})
	go func() { // a second one, on demand, in a loop
		defer loops.Done()
		defer close(repairing)
		for ctx.Err() == nil {
			if rep, err := w.rec.Repair(ctx, []string{"hot", "cold"}); err != nil && ctx.Err() == nil {
				t.Errorf("Repair: %v: %+v", err, rep.Corrections)
				return
			}
			passes.Add(1)
		}
	}()

	const buyers, each = 8, 30
	var placed atomic.Int64
	var flushing sync.RWMutex // real servers: no order is half-way while keys are deleted
	var ids sync.Map
	var wg sync.WaitGroup
	for b := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(b), 7))
			for i := range each {
				sku := "hot"
				if rng.IntN(3) == 0 {
					sku = "cold"
				}
				id := fmt.Sprintf("b%d-%d", b, i)
				ids.Store(id, true)
				if placed.Add(1) == flushAt {
					flushing.Lock()
					w.flush()
					flushing.Unlock()
				}
				qty, settle := 1+int64(rng.IntN(2)), rng.IntN(3)
				func() {
					if w.mini == nil { // a real FLUSHALL is atomic; deleting keys one by one is not
						flushing.RLock()
						defer flushing.RUnlock()
					}
					err := w.flow.Deduct(ctx, order(id, sku, qty))
					if err != nil {
						if flushAt == 0 && !errors.Is(err, stock.ErrSoldOut) {
							t.Errorf("Deduct %s: %v", id, err)
						}
						return
					}
					switch settle {
					case 0:
						err = w.flow.Confirm(ctx, id)
					case 1:
						err = w.flow.Revert(ctx, id)
					}
					if err != nil && flushAt == 0 {
						t.Errorf("settle %s: %v", id, err)
					}
				}()
			}
		}()
	}
	wg.Wait()
	// At least one whole pass after the last order (the one running now may
	// have read before it).
	for start := passes.Load(); passes.Load() < start+2; {
		select {
		case <-repairing: // it failed and said why; waiting for it would hang
		case <-time.After(time.Millisecond):
			continue
		}
		break
	}
	cancel()
	loops.Wait()
	if flushAt > 0 && countAction(w.corrections(), reconcile.ActionRebuilt) == 0 {
		t.Errorf("Redis was flushed mid-sale and no pass rebuilt it: %+v", w.corrections())
	}
	if flushAt == 0 {
		if c := w.corrections(); len(c) != 0 {
			t.Errorf("reconcilers running beside live orders corrected %d times, first %+v; want none", len(c), c[0])
		}
	}

	// Unpaid holds are returned on both sides, then a final pass.
	w.clock.Advance(time.Hour)
	for {
		got, err := w.flow.ReclaimExpired(w.ctx, 1000)
		w.must(err, "ReclaimExpired")
		if len(got) == 0 {
			break
		}
	}
	if _, err := w.rec.RepairAll(w.ctx); err != nil {
		t.Fatalf("final RepairAll: %v", err)
	}
	var all []string
	ids.Range(func(k, _ any) bool { all = append(all, k.(string)); return true })
	infos, err := w.record.Orders(w.ctx, all)
	w.must(err, "Orders")
	sold := map[string]int64{}
	for _, o := range infos {
		if o.State == stock.StateConfirmed {
			for _, it := range o.Items {
				sold[it.SKU] += it.Qty
			}
		}
	}
	for sku, units := range skus {
		g, r := w.levels(sku)
		if r.Sold != sold[sku] || r.Held != 0 || r.Available+r.Sold != units {
			t.Errorf("%s database: available %d held %d sold %d, confirmed orders %d; want available+sold = %d, held 0, sold = confirmed",
				sku, r.Available, r.Held, r.Sold, sold[sku], units)
		}
		if g.Available != r.Available {
			t.Errorf("%s: Redis available %d, database %d after the final pass", sku, g.Available, r.Available)
		}
		t.Logf("%s: %d of %d units sold, Redis and database agree at %d available", sku, r.Sold, units, r.Available)
	}
	rep, err := w.rec.RepairAll(w.ctx)
	if err != nil || len(rep.Corrections) != 0 {
		t.Errorf("a pass after the final one: %v, %+v; want agreement", err, rep.Corrections)
	}
	t.Logf("%d orders placed, %d corrections during the sale", placed.Load(), len(w.corrections()))
}

func TestReconcileBesideLiveOrdersIntroducesNoDrift(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) { liveSale(t, p, 0) })
}

func TestRedisFlushedMidSaleIsRebuilt(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) { liveSale(t, p, 80) })
}

func countAction(cs []reconcile.Correction, a reconcile.Action) int {
	n := 0
	for _, c := range cs {
		if c.Action == a {
			n++
		}
	}
	return n
}
