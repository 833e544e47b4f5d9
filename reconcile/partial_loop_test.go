package reconcile_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// loseAfterRebuild loses the first bucket's state (its master's data)
// after every Rebuild script that wrote it.
type loseAfterRebuild struct {
	hash, key string
	lose      func()
	calls     atomic.Int64
}

func (h *loseAfterRebuild) hit(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		args := c.Args()
		if strings.ToLower(c.Name()) == "evalsha" && len(args) > 3 {
			if sha, _ := args[1].(string); sha == h.hash {
				if k, _ := args[3].(string); k == h.key {
					return true
				}
			}
		}
	}
	return false
}

func (h *loseAfterRebuild) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *loseAfterRebuild) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.hit([]redis.Cmder{cmd}) {
			h.calls.Add(1)
			h.lose()
		}
		return err
	}
}

func (h *loseAfterRebuild) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if h.hit(cmds) {
			h.calls.Add(1)
			h.lose()
		}
		return err
	}
}

// Config.MaxAttempts bounds a pass's readings of a SKU (two more for a
// SKU rebuilt Partial): a SKU whose first bucket's master loses its data
// again after each rebuild, while its living buckets hold more than the
// record, is rebuilt Partial at every attempt; the pass must still end,
// after at most MaxAttempts+2 rebuilds, reporting it (bounded cost,
// invariant 5), not read and rebuild it until its context ends.
func TestPartialRebuildOnLastAttemptEndsThePass(t *testing.T) {
	p := r3bClusterPairs()[0]
	w := newWorld(t, p, reconcile.Config{})
	const sku = "zzloop"
	w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: sku, Units: 30, HoldTTL: time.Minute, Buckets: 3}), "PutOnSale")
	names, _ := w.r3bBuckets(sku, 3)
	w.r3bLoseSlot(names[0])
	w.must(w.record.Deduct(w.ctx, stock.Order{ID: "fb1", Items: []stock.Item{{SKU: sku, Qty: 15}}}), "record Deduct")
	h := &loseAfterRebuild{hash: redis.NewScript(lua.Script("stock_rebuild.lua")).Hash(),
		key: w.prefix + ":{" + sku + "}:state", lose: func() { w.r3bLoseSlot(names[0]) }}
	w.rc.AddHook(h)

	rec, err := reconcile.New(w.gate, w.record, reconcile.Config{Clock: w.clock, MaxAttempts: 1})
	w.must(err, "New")
	ctx, cancel := context.WithTimeout(w.ctx, 3*time.Second)
	defer cancel()
	rep, err := rec.Repair(ctx, []string{sku})
	t.Logf("pass: %+v, err %v; first-bucket rebuilds %d", rep, err, h.calls.Load())
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Errorf("the pass ran until its context ended (%v)", err)
	}
	if n := h.calls.Load(); n > 3 {
		t.Errorf("the pass rebuilt the SKU's first bucket %d times, want at most MaxAttempts+2 = 3", n)
	}
}
