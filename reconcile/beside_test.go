package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// snapshotGate runs a hook before every Snapshot: after a pass read the
// database (t1), before it reads Redis (t2).
type snapshotGate struct {
	reconcile.Gate
	before func()
}

func (g *snapshotGate) Snapshot(ctx context.Context, reqs []redisstock.SnapshotRequest) ([]redisstock.Snapshot, error) {
	g.before()
	return g.Gate.Snapshot(ctx, reqs)
}

// sellBetweenReadings returns a reconciler on w's stores that, between
// every reading of the database and of Redis, sells one unit of sku
// through the tiered flow (recorded, then confirmed at both tiers).
func sellBetweenReadings(w *world, sku string) (*reconcile.Reconciler, *int) {
	sold := 0
	g := &snapshotGate{Gate: w.gate, before: func() {
		sold++
		id := fmt.Sprintf("between-%d", sold)
		w.must(w.flow.Deduct(w.ctx, order(id, sku, 1)), "Deduct "+id)
		w.must(w.flow.Confirm(w.ctx, id), "Confirm "+id)
	}}
	r, err := reconcile.New(g, w.record, reconcile.Config{Clock: w.clock})
	w.must(err, "New")
	return r, &sold
}

// An order recorded after a pass read the database and confirmed at the
// gate before it read Redis is sold in Redis and unknown to the view it
// read: that reading alone computes a target one unit high. When it recurs
// on the second reading too (a busy SKU under load: each reading catches
// another such order), the pass must still not raise Redis: the gate would
// admit a unit the record cannot take.
func TestOrderSoldBetweenTheReadingsRaisesNothing(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.sale("a", 10)
		r, sold := sellBetweenReadings(w, "a")
		rep, err := r.Repair(w.ctx, []string{"a"})
		w.must(err, "Repair")
		gl, rl := w.levels("a")
		if len(rep.Corrections) != 0 || gl.Available != rl.Available || rl.Available != int64(10-*sold) {
			t.Fatalf("after a pass beside %d sales: %+v, gate %d, record %d; want no correction, both at %d",
				*sold, rep.Corrections, gl.Available, rl.Available, 10-*sold)
		}
	})
}

// The same sales beside a real drift: the database can take 5 units more
// than Redis has (a record-only listing). The pass corrects exactly those
// 5, not the unit each reading's sale adds.
func TestDriftBesideSalesBetweenTheReadingsIsCorrectedExactly(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.sale("a", 10)
		w.must(w.record.PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 15}), "record-only PutOnSale")
		r, sold := sellBetweenReadings(w, "a")
		rep, err := r.Repair(w.ctx, []string{"a"})
		w.must(err, "Repair")
		gl, rl := w.levels("a")
		if rep.Count(reconcile.ActionCorrected) != 1 || gl.Available != rl.Available || rl.Available != int64(15-*sold) {
			t.Fatalf("after a pass beside %d sales: %+v, gate %d, record %d; want one correction, both at %d",
				*sold, rep.Corrections, gl.Available, rl.Available, 15-*sold)
		}
	})
}

// rivals makes two reconcilers' rebuilds of a flushed SKU interleave as
// they do under load: each one's database read (stretched to read) lasts
// until the other has claimed the SKU again since, or read has passed.
type rivals struct {
	read    time.Duration
	mu      sync.Mutex
	seq     int
	last    map[string]int // the latest claim of each reconciler
	claimed chan struct{}  // closed and replaced at every claim
}

// rivalGate is one of the two reconcilers' gate.
type rivalGate struct {
	reconcile.Gate
	name, other string
	r           *rivals
}

func (g *rivalGate) ClaimRebuild(ctx context.Context, skus []string) ([]string, error) {
	tokens, err := g.Gate.ClaimRebuild(ctx, skus)
	g.r.mu.Lock()
	g.r.seq++
	g.r.last[g.name] = g.r.seq
	close(g.r.claimed)
	g.r.claimed = make(chan struct{})
	g.r.mu.Unlock()
	return tokens, err
}

func (g *rivalGate) Rebuild(ctx context.Context, rs []redisstock.Rebuild) ([]redisstock.Outcome, error) {
	time.Sleep(g.r.read)
	deadline := time.After(g.r.read)
	for {
		g.r.mu.Lock()
		ahead, next := g.r.last[g.other] > g.r.last[g.name], g.r.claimed
		g.r.mu.Unlock()
		if ahead {
			break
		}
		select {
		case <-next:
			continue
		case <-deadline:
		}
		break
	}
	return g.Gate.Rebuild(ctx, rs)
}

// Two reconcilers rebuilding a flushed SKU at once: each one's claim
// voids the other's, so one that claims again right after its rebuild was
// refused voids the rebuild the other is about to make, and the two can
// go on doing that to each other until both give up (ActionStale, a Repair
// error during a sale). One of them must rebuild the SKU, and neither may
// report it unresolved.
func TestRivalRebuildsSettle(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.sale("a", 10)
		w.must(w.flow.Deduct(w.ctx, order("o1", "a", 2)), "Deduct")
		w.flush()
		rv := &rivals{read: 50 * time.Millisecond, last: map[string]int{}, claimed: make(chan struct{})}
		reps := make([]reconcile.Report, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, name := range []string{"A", "B"} {
			g := &rivalGate{Gate: w.gate, name: name, other: map[string]string{"A": "B", "B": "A"}[name], r: rv}
			r, err := reconcile.New(g, w.record, reconcile.Config{Clock: w.clock})
			w.must(err, "New")
			wg.Add(1)
			go func() {
				defer wg.Done()
				reps[i], errs[i] = r.Repair(w.ctx, []string{"a"})
			}()
		}
		wg.Wait()
		rebuilt := reps[0].Count(reconcile.ActionRebuilt) + reps[1].Count(reconcile.ActionRebuilt)
		if errs[0] != nil || errs[1] != nil || rebuilt != 1 {
			t.Fatalf("rival passes: %v, %v; %+v, %+v; want both nil and one rebuild", errs[0], errs[1],
				reps[0].Corrections, reps[1].Corrections)
		}
		if gl, rl := w.levels("a"); gl.Available != 8 || rl.Available != 8 {
			t.Fatalf("gate %d, record %d after the rebuild; want 8, 8", gl.Available, rl.Available)
		}
	})
}

// The gate's registry (the SKUs its reclaimer walks) can be lost alone: a
// Cluster master that lost its data, or a flush that reached that master
// after a pass had rebuilt SKUs on the others. The holds of a SKU it no
// longer names were then never returned at the gate, while the record
// returned its copies at their deadline: Redis stayed below the record
// for good, and every pass counted the stranded holds as in flight. A
// pass puts the SKU back in the registry, so the holds end on both sides.
func TestHoldsOfASKUTheRegistryLostAreReturned(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.sale("a", 10)
		w.must(w.flow.Deduct(w.ctx, order("o1", "a", 2)), "Deduct")
		w.must(w.rc.Del(w.ctx, w.prefix+":skus").Err(), "lose the registry")
		rep, err := w.rec.Repair(w.ctx, []string{"a"})
		if err != nil || len(rep.Corrections) != 0 {
			t.Fatalf("Repair: %v, %+v; want agreement (the hold is in flight)", err, rep.Corrections)
		}
		w.clock.Advance(time.Hour)
		for {
			got, err := w.flow.ReclaimExpired(w.ctx, 100)
			w.must(err, "ReclaimExpired")
			if len(got) == 0 {
				break
			}
		}
		if gl, rl := w.levels("a"); gl.Available != 10 || gl.Held != 0 || rl.Available != 10 {
			t.Fatalf("after the holds' deadline: gate %+v, record %d available; want both at 10, nothing held", gl, rl.Available)
		}
	})
}
