package reconcile_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// rebuildGate is a gate that runs first, once, before its first Rebuild,
// and records the outcomes of every Rebuild. Every other call is the
// embedded gate's.
type rebuildGate struct {
	reconcile.Gate
	first    func(ctx context.Context)
	once     sync.Once
	mu       sync.Mutex
	outcomes []redisstock.Outcome
}

func (g *rebuildGate) Rebuild(ctx context.Context, rs []redisstock.Rebuild) ([]redisstock.Outcome, error) {
	g.once.Do(func() { g.first(ctx) })
	got, err := g.Gate.Rebuild(ctx, rs)
	g.mu.Lock()
	g.outcomes = append(g.outcomes, got...)
	g.mu.Unlock()
	return got, err
}

// stoppedRivalGate is the gate of a reconciler whose first Rebuild of sku
// is preceded by another reader's claim of it (that reader then stops
// without rebuilding): that Rebuild is Moved. Every later call is gate's.
// It records the outcomes of every Rebuild.
func stoppedRivalGate(gate reconcile.Gate, sku string) *rebuildGate {
	return &rebuildGate{Gate: gate, first: func(ctx context.Context) {
		// Another reader claims the SKU, voiding this one's claim, and
		// stops before it rebuilds.
		_, _ = gate.ClaimRebuild(ctx, []string{sku})
	}}
}

// A SKU in 3 buckets of 10,000 whose first bucket was lost, 15,000 sold at
// the record alone. The pass's first rebuild meets another reader's claim
// (Moved); that reader stopped, so after waiting the pass claims the SKU
// again and rebuilds it itself, beside the living buckets (Partial: on
// sale with their 20,000 units). The pass that rebuilt a SKU Partial
// corrects it down whatever MaxAutoFix, "with two more readings of that
// SKU past MaxAttempts if needed, once" (Config.MaxAutoFix): the earlier
// Moved must not have used those readings up.
func TestRivalClaimThenOwnPartialRebuildIsCorrected(t *testing.T) {
	for _, p := range r3bClusterPairs() {
		t.Run(p.name, func(t *testing.T) {
			testdb.Need(t, p.needs...)
			w := newWorld(t, p, reconcile.Config{})
			const sku = "stoppedrival"
			w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: sku, Units: 30000, HoldTTL: time.Minute, Buckets: 3}), "PutOnSale")
			names, _ := w.r3bBuckets(sku, 3)
			w.r3bLoseSlot(names[0])
			w.must(w.record.Deduct(w.ctx, stock.Order{ID: "fb1", Items: []stock.Item{{SKU: sku, Qty: 15000}}}), "record Deduct")

			g := stoppedRivalGate(w.gate, sku)
			rc, err := reconcile.New(g, w.record, reconcile.Config{Clock: w.clock, MaxAttempts: 3})
			w.must(err, "New")
			ctx, cancel := context.WithTimeout(w.ctx, 20*time.Second)
			defer cancel()
			rep, err := rc.Repair(ctx, []string{sku})
			gl, rl := w.levels(sku)
			t.Logf("rebuilds %v; report %+v; err %v; gate %d record %d", g.outcomes, rep.Corrections, err, gl.Available, rl.Available)
			if len(g.outcomes) != 2 || g.outcomes[0] != redisstock.Moved || g.outcomes[1] != redisstock.Partial {
				t.Fatalf("rebuild outcomes %v; want [Moved Partial]", g.outcomes)
			}
			if err != nil {
				t.Errorf("Repair returned %v; want nil", err)
			}
			if n := rep.Count(reconcile.ActionStale) + rep.Count(reconcile.ActionLeft); n != 0 {
				t.Errorf("%d SKUs reported stale or left; want 0", n)
			}
			if gl.Available != 15000 || rl.Available != 15000 {
				t.Errorf("gate %d, record %d; want both 15000", gl.Available, rl.Available)
			}
		})
	}
}
