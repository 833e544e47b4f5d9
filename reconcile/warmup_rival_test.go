package reconcile_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// rivalClaimGate: another reader claims every SKU between this reader's claim
// and its Rebuild (the interleaving two WarmUps in phase produce).
type rivalClaimGate struct {
	*redisstock.Store
	rebuilds atomic.Int64
}

func (g *rivalClaimGate) Rebuild(ctx context.Context, rs []redisstock.Rebuild) ([]redisstock.Outcome, error) {
	g.rebuilds.Add(1)
	skus := make([]string, len(rs))
	for i, r := range rs {
		skus[i] = r.Listing.SKU
	}
	if _, err := g.Store.ClaimRebuild(ctx, skus); err != nil {
		return nil, err
	}
	return g.Store.Rebuild(ctx, rs)
}

func TestWarmUpRebuildAgainstARivalClaimIsBoundedByMaxAttempts(t *testing.T) {
	w := newWorld(t, pairs()[0], reconcile.Config{MaxAttempts: 3})
	w.sale("a", 10)
	w.flush()
	g := &rivalClaimGate{Store: w.gate}
	rec, err := reconcile.New(g, w.record, reconcile.Config{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(w.ctx, 2*time.Second)
	defer cancel()
	_, err = rec.WarmUp(ctx, []string{"a"}, false)
	if n := g.rebuilds.Load(); n > 3 {
		t.Fatalf("WarmUp called Rebuild %d times with MaxAttempts 3 (err %v): it loops until ctx ends", n, err)
	}
}
