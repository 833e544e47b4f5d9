package redisstock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// bindGate holds the pipelines that carry a bind's HSETNX while closed.
type bindGate struct {
	mu      sync.Mutex
	gate    chan struct{}
	waiting int
}

func (h *bindGate) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *bindGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *bindGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "hsetnx" {
				h.mu.Lock()
				g := h.gate
				if g != nil {
					h.waiting++
				}
				h.mu.Unlock()
				if g != nil {
					<-g
				}
				break
			}
		}
		return next(ctx, cmds)
	}
}

// observe.Batch.Wait is "how long the batch's oldest call waited before
// the batch was sent". On a Cluster a Deduct waits first in the bind
// batcher shared by every slot (whose batches are not reported): its take
// batch reports the wait from when the Deduct queued for its bind, so a
// Deduct held 300ms behind two bind batches is reported as such.
func TestClusterObservedWaitCountsTheBindQueue(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		var rec observe.Recorder
		cfg := fx.cfg
		cfg.Observer = rec.Observer()
		s := newStore(t, fx.c, cfg)
		if err := s.PutOnSale(fx.ctx(), stockListing("a")); err != nil {
			t.Fatal(err)
		}
		g := &bindGate{gate: make(chan struct{})}
		fx.c.AddHook(g)
		var wg sync.WaitGroup
		for i := range 2 { // both in-flight bind batches held
			wg.Go(func() { _ = s.Deduct(fx.ctx(), ord("blk"+strconv.Itoa(i), "u", it("a", 1))) })
		}
		waitFor(t, "two bind batches held", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.waiting == 2 })
		var err error
		wg.Go(func() { err = s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1))) })
		const queued = 300 * time.Millisecond
		time.Sleep(queued)
		g.mu.Lock()
		close(g.gate)
		g.gate = nil
		g.mu.Unlock()
		wg.Wait()
		is(t, err, nil, "o1")
		var most time.Duration
		for _, b := range rec.Batches() {
			most = max(most, b.Wait)
		}
		if most < queued/2 {
			t.Fatalf("o1 waited %v before any of its commands was sent; the batches report at most %v waited (%+v)", queued, most, rec.Batches())
		}
	})
}

func stockListing(sku string) stock.Listing {
	return stock.Listing{SKU: sku, Units: 10, HoldTTL: time.Minute}
}
