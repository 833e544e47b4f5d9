package redisstock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A return of an order on several slots whose reply is lost after its
// applies were sent, and that is never retried, leaves the order's return
// lock naming it. The lock must end with the order: once the order ended
// and Retention passed, the reclaimer leaves no key the sale did not have
// before, whether the return came while the order was held (o1, confirmed
// after it) or after it was confirmed (o2).
func TestReturnLockEndsWithTheOrder(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Second})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Hour)
		fx.sale(hi, 10, 0, time.Hour)
		reclaim := func() {
			t.Helper()
			elapse(fx, 1500*time.Millisecond)
			if _, err := fx.s.ReclaimExpired(fx.ctx(), 100); err != nil {
				t.Fatal(err)
			}
		}
		// A whole order first, so the keys of the sale itself exist.
		is(t, fx.s.Deduct(fx.ctx(), ord("o0", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct o0")
		is(t, fx.s.Confirm(fx.ctx(), "o0"), nil, "Confirm o0")
		reclaim()
		before := fx.keyNames()

		halfApplied := func(r stock.Return) {
			t.Helper()
			h := &dropAfterFirst{sha: redis.NewScript(lua.Script("stock_return.lua")).Hash(), armed: true}
			fx.loadScripts()
			fx.c.AddHook(h)
			unknown(t, fx.s.RevertItems(fx.ctx(), r), "RevertItems applied on one slot")
			h.mu.Lock()
			h.armed = false
			h.mu.Unlock()
		}
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2), it(hi, 2))), nil, "Deduct o1")
		halfApplied(rt("r1", "o1", it(lo, 1), it(hi, 1)))
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm o1")
		is(t, fx.s.Deduct(fx.ctx(), ord("o2", "u1", it(lo, 2), it(hi, 2))), nil, "Deduct o2")
		is(t, fx.s.Confirm(fx.ctx(), "o2"), nil, "Confirm o2")
		halfApplied(rt("r2", "o2", it(lo, 1), it(hi, 1)))
		reclaim()
		for k := range fx.keyNames() {
			if !before[k] {
				t.Errorf("key %s left past Retention after every order ended", k)
			}
		}
	})
}

// keyNames lists the keys of the fixture's prefix on every master, less
// the reclaim passes' replies (kept a minute whatever the orders).
func (fx *fixture) keyNames() map[string]bool {
	fx.t.Helper()
	var mu sync.Mutex
	out := map[string]bool{}
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, fx.cfg.Prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			if k := iter.Val(); !strings.Contains(k, ":rc:") {
				mu.Lock()
				out[k] = true
				mu.Unlock()
			}
		}
		return iter.Err()
	}
	var err error
	switch c := fx.c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(fx.ctx(), scan)
	case *redis.Client:
		err = scan(fx.ctx(), c)
	default:
		fx.t.Fatalf("keyNames: client %T", fx.c)
	}
	if err != nil {
		fx.t.Fatal(err)
	}
	return out
}
