package redisstock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// Migrate keeps the lease of a live order's attempt set (layout 1: the
// bind set's TTL): within it the ID is bound (another order under it is a
// conflict), after it the entry is stale and another order whose
// predecessor holds nothing takes the ID over.
func TestReviewHotMigrateKeepsAttemptLease(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		migrateLeasedOrder(t, fx)
		is(t, fx.s.Deduct(ctx, ord("o1", "u2", it("a", 2))), stock.ErrConflict, "another order under o1 within the lease")
		elapse(fx, 2*time.Second)
		is(t, fx.s.Deduct(ctx, ord("o1", "u2", it("a", 2))), nil, "another order under o1 after the lease")
		fx.want("a", 8, 2, 0)
	})
}

// migrateLeasedOrder writes layout 1 under the fixture's prefix (SKU a,
// 10 units; order o1 bound by an attempt whose set is on a 1.5 s lease,
// nothing taken) and migrates it, on a Store with Retention 1 h.
func migrateLeasedOrder(t *testing.T, fx *fixture) {
	t.Helper()
	ctx, p := fx.ctx(), fx.cfg.Prefix
	fx.s = newStore(t, fx.c, redisstock.Config{Prefix: p, Clock: fx.clock, Retention: time.Hour})
	for _, cmd := range []func(redis.Pipeliner){
		func(c redis.Pipeliner) { c.SAdd(ctx, p+":skus", "a") },
		func(c redis.Pipeliner) {
			c.HSet(ctx, p+":{a}:state", "avail", 10, "held", 0, "sold", 0, "limit", 0, "hold_ms", 60000, "max_ms", 60000,
				"ver", 1, "epoch", 1, "gen", "g1")
		},
		func(c redis.Pipeliner) { c.Set(ctx, p+":order:{o1}", "u1\na\x1f1\x1e", 0) },
		func(c redis.Pipeliner) { c.SAdd(ctx, p+":bind:{o1}", "t9") },
		func(c redis.Pipeliner) { c.PExpire(ctx, p+":bind:{o1}", 1500*time.Millisecond) },
	} {
		if _, err := fx.c.Pipelined(ctx, func(c redis.Pipeliner) error { cmd(c); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fx.s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}
