package redisstock_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// The layout check looks at one key only: a registry without the layout
// mark. A prefix of layout 1 whose registry key alone was lost (its Cluster
// master lost its data, or it was evicted: cases the Store itself handles,
// see relist in snapshot.go) passes it, and the Store of layout 2 then reads
// the old data as something else. Here the gate's registry is gone; a
// reconciler rebuilds SKU a from the record, as it does for any gate that
// lost its registry. The old state's layout-1 hold h1 (2 units, user u1,
// in a's holds zset, with its record and directory entry) is read as no
// hold: the rebuild counts 0 held, the reclaimer drops h1 from the zset
// without returning or reporting it, so u1's 2 units of per-user quota are
// never given back.
func TestReviewLayoutOldDataWithoutRegistryIsMisread(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		ctx, p := fx.ctx(), fx.cfg.Prefix
		now := fx.clock.Now()
		dl := strconv.FormatInt(now.Add(time.Minute).UnixMilli(), 10)
		ident := "u1\na\x1f2\x1e"
		// What a Store of layout 1 left (one command at a time: on a
		// Cluster the keys are on several slots); no registry key.
		for _, cmd := range []func(redis.Pipeliner){
			func(c redis.Pipeliner) {
				c.HSet(ctx, p+":{a}:state", "avail", 8, "held", 2, "sold", 0, "limit", 2, "hold_ms", 60000,
					"max_ms", 60000, "ver", 2, "epoch", 1, "gen", "g1")
			},
			func(c redis.Pipeliner) { c.HSet(ctx, p+":{a}:users", "u1", 2) },
			func(c redis.Pipeliner) {
				c.ZAdd(ctx, p+":{a}:holds", redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "h1"})
			},
			func(c redis.Pipeliner) {
				c.HSet(ctx, p+":{a}:o:h1", "st", "held", "qty", 2, "user", "u1", "dl", dl, "mx", dl, "id", ident)
			},
			func(c redis.Pipeliner) { c.Set(ctx, p+":order:{h1}", ident, 0) },
		} {
			if _, err := fx.c.Pipelined(ctx, func(c redis.Pipeliner) error { cmd(c); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		s := newStore(t, fx.c, redisstock.Config{Prefix: p, Clock: fx.clock})
		fx.s = s
		l := stock.Listing{SKU: "a", Units: 8, PerUserLimit: 2, HoldTTL: time.Minute}
		out, err := s.Rebuild(ctx, []redisstock.Rebuild{{Listing: l}})
		if errors.Is(err, redisstock.ErrLayout) {
			return // refused: fine
		}
		t.Errorf("Rebuild on a prefix holding layout-1 data (registry lost) = %v, %v; want ErrLayout", out, err)
		lv, _ := s.Levels(ctx, "a")
		if lv.Held != 2 {
			t.Errorf("rebuilt state counts %d held; the layout-1 hold h1 holds 2", lv.Held)
		}
		fx.clock.Advance(2 * time.Minute)
		got, err := s.ReclaimExpired(ctx, 10)
		if err != nil || len(got) != 1 {
			t.Errorf("ReclaimExpired past h1's deadline = %+v, %v; want h1's 2 units of a", got, err)
		}
		if n, _ := s.UserUnits(ctx, "a", "u1"); n != 0 {
			t.Errorf("u1 still counts %d units of a after h1 ended: its per-user quota is never given back", n)
		}
	})
}
