package redisstock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock/redisstock"
)

// Migrate gives each entry it converts that has not ended its member in
// its shard's open zset, as a bind does, so that the reclaimer settles it
// as any other: the entry of an order that took nothing is deleted once
// its attempts' lease has passed (before, it was stored for good, an
// orphan to Audit).
func TestMigratedEntryIsSettled(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		ctx, p := fx.ctx(), fx.cfg.Prefix
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: p, Clock: fx.clock, Retention: time.Hour})
		for _, cmd := range []func(redis.Pipeliner){
			func(c redis.Pipeliner) { c.SAdd(ctx, p+":skus", "a") },
			func(c redis.Pipeliner) {
				c.HSet(ctx, p+":{a}:state", "avail", 10, "held", 0, "sold", 0, "limit", 0, "hold_ms", 60000, "max_ms", 60000,
					"ver", 1, "epoch", 1, "gen", "g1")
			},
			// o1: bound by an attempt still on a lease, with nothing
			// taken.
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
		fx.audit(-1)
		settledAway(t, fx, "o1")
		fx.audit(0)
		fx.want("a", 10, 0, 0)
	})
}
