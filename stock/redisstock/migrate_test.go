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

// layout1 writes, under fx's prefix, what a Store of key layout 1 left
// after these calls (its scripts' formats: a hash per order line, a string
// per order, a set of attempts per order on a Cluster, states with
// hold_ms):
//
//	PutOnSale a (10 units), b (10)           hold time 1m
//	Deduct h1 {a: 2} by u1, two attempts     held
//	Deduct c1 {a: 1} by u2, Confirm          confirmed (TTL: Retention)
//	Deduct p1 {b: 3} by u3, RevertItems op1 {b: 1}   held, 1 unit back
func layout1(t *testing.T, fx *fixture, now time.Time) {
	t.Helper()
	ctx, p := fx.ctx(), fx.cfg.Prefix
	dl := strconv.FormatInt(now.Add(time.Minute).UnixMilli(), 10)
	keep := time.Hour
	cmds := []func(redis.Pipeliner){
		func(c redis.Pipeliner) { c.SAdd(ctx, p+":skus", "a", "b") },
		func(c redis.Pipeliner) {
			c.HSet(ctx, p+":{a}:state", "avail", 7, "held", 2, "sold", 1, "limit", 0, "hold_ms", 60000, "max_ms", 60000,
				"ver", 4, "epoch", 1, "gen", "g1")
		},
		func(c redis.Pipeliner) {
			c.HSet(ctx, p+":{b}:state", "avail", 8, "held", 2, "sold", 0, "limit", 0, "hold_ms", 60000, "max_ms", 60000,
				"ver", 3, "epoch", 1, "gen", "g2", "rn", 1)
		},
		func(c redis.Pipeliner) { c.HSet(ctx, p+":{a}:users", "u1", 2, "u2", 1) },
		func(c redis.Pipeliner) { c.HSet(ctx, p+":{b}:users", "u3", 2) },
		func(c redis.Pipeliner) {
			c.ZAdd(ctx, p+":{a}:holds", redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "h1"})
		},
		func(c redis.Pipeliner) {
			c.ZAdd(ctx, p+":{b}:holds", redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "p1"})
		},
		func(c redis.Pipeliner) {
			c.HSet(ctx, p+":{a}:o:h1", "st", "held", "qty", 2, "user", "u1", "dl", dl, "mx", dl, "id", "u1\na\x1f2\x1e", "at", "t1 t2")
		},
		func(c redis.Pipeliner) { c.Set(ctx, p+":order:{h1}", "u1\na\x1f2\x1e", 0) },
		func(c redis.Pipeliner) { c.SAdd(ctx, p+":bind:{h1}", "t1", "t2") },
		func(c redis.Pipeliner) {
			c.HSet(ctx, p+":{a}:o:c1", "st", "confirmed", "qty", 1, "user", "u2", "dl", dl, "mx", dl, "id", "u2\na\x1f1\x1e")
			c.PExpire(ctx, p+":{a}:o:c1", keep)
		},
		func(c redis.Pipeliner) { c.Set(ctx, p+":order:{c1}", "u2\na\x1f1\x1e", keep) },
		func(c redis.Pipeliner) {
			c.HSet(ctx, p+":{b}:o:p1", "st", "held", "qty", 3, "user", "u3", "dl", dl, "mx", dl, "id", "u3\nb\x1f3\x1e",
				"ret", 1, "r:op1", "b\x1f1\x1e")
		},
		func(c redis.Pipeliner) { c.Set(ctx, p+":order:{p1}", "u3\nb\x1f3\x1e", 0) },
	}
	for _, cmd := range cmds {
		// One command per pipeline: on a Cluster the keys are on several
		// slots.
		if _, err := fx.c.Pipelined(ctx, func(c redis.Pipeliner) error { cmd(c); return nil }); err != nil {
			t.Fatal(err)
		}
	}
}

// A Store of layout 2 refuses a prefix of layout 1 with ErrLayout, which
// matches stock.ErrUnavailable, before it reads or writes anything there.
// Migrate converts the prefix in place, once: then every order of the old
// layout is served as it was (a repeat is idempotent, Confirm, Revert,
// partial returns and the reclaimer find their records), and every record
// keeps its retention.
func TestMigrateFromLayout1(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		now := fx.clock.Now()
		layout1(t, fx, now)
		err := fx.s.Deduct(fx.ctx(), ord("new", "u9", it("a", 1)))
		if !errors.Is(err, redisstock.ErrLayout) || !errors.Is(err, stock.ErrUnavailable) {
			t.Fatalf("Deduct on a prefix of layout 1: %v, want ErrLayout and stock.ErrUnavailable", err)
		}
		if _, err := fx.s.Levels(fx.ctx(), "a"); !errors.Is(err, redisstock.ErrLayout) {
			t.Fatalf("Levels on a prefix of layout 1: %v, want ErrLayout", err)
		}
		if err := fx.s.Confirm(fx.ctx(), "h1"); !errors.Is(err, redisstock.ErrLayout) {
			t.Fatalf("Confirm on a prefix of layout 1: %v, want ErrLayout", err)
		}

		rep, err := fx.s.Migrate(fx.ctx())
		if err != nil || rep != (redisstock.MigrateReport{States: 2, Lines: 3, Orders: 3}) {
			t.Fatalf("Migrate = %+v, %v; want 2 states, 3 lines, 3 orders", rep, err)
		}
		if rep, err := fx.s.Migrate(fx.ctx()); err != nil || rep != (redisstock.MigrateReport{}) {
			t.Fatalf("Migrate again = %+v, %v; want nothing converted", rep, err)
		}
		fx.want("a", 7, 2, 1)
		fx.want("b", 8, 2, 0)
		if f, ok, err := fx.s.Line(fx.ctx(), "a", "h1"); err != nil || !ok || f["at"] != "t1,t2" || f["st"] != "held" {
			t.Fatalf("h1's line of a = %v, %v, %v; want held, with its attempts", f, ok, err)
		}

		// A second Store of layout 2 serves the migrated prefix.
		s2 := newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		is(t, s2.Deduct(fx.ctx(), ord("h1", "u1", it("a", 2))), nil, "a repeat of h1")
		fx.want("a", 7, 2, 1)
		is(t, s2.Deduct(fx.ctx(), ord("c1", "u2", it("b", 1))), stock.ErrConflict, "c1's ID, with other items, within its retention")
		is(t, s2.Confirm(fx.ctx(), "h1"), nil, "Confirm h1")
		fx.want("a", 7, 0, 3)
		is(t, s2.Revert(fx.ctx(), "c1"), nil, "refund c1")
		fx.want("a", 8, 0, 2)
		fx.wantUser("a", "u2", 0)
		is(t, s2.RevertItems(fx.ctx(), rt("op1", "p1", it("b", 1))), nil, "op1 repeated")
		fx.want("b", 8, 2, 0)
		got, err := s2.Orders(fx.ctx(), []string{"h1", "c1", "p1"})
		if err != nil || got[0].State != stock.StateConfirmed || got[1].State != stock.StateRefunded ||
			got[2].State != stock.StateHeld || got[2].Returned[0].Qty != 1 {
			t.Fatalf("Orders = %+v, %v", got, err)
		}
		fx.clock.Advance(2 * time.Minute)
		rc, err := s2.ReclaimExpired(fx.ctx(), 10)
		if err != nil || len(rc) != 1 || rc[0] != (stock.Reclaimed{OrderID: "p1", UserID: "u3", SKU: "b", Qty: 2}) {
			t.Fatalf("ReclaimExpired = %+v, %v; want p1's 2 units of b", rc, err)
		}
		fx.want("b", 10, 0, 0)
		fx.wantUser("b", "u3", 0)
		// c1's record and entry kept the retention they had (an hour from
		// its Confirm, on the server's TTL), then read as gone (moving the
		// server's clock: miniredis only).
		if fx.mini != nil {
			elapse(fx, time.Hour)
			is(t, s2.Deduct(fx.ctx(), ord("c1", "u2", it("b", 1))), nil, "c1's ID, after its retention")
			fx.want("b", 9, 1, 0)
		}
	})
}

// A state of layout 1 is refused with ErrLayout by every call that would
// write it or return its holds, also where the registry key alone was lost
// (the Store's first check, on the registry, then finds nothing to
// refuse): the old data is left as it was for Migrate.
func TestLayout1StateIsRefusedWithoutTheRegistry(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		layout1(t, fx, fx.clock.Now())
		if err := fx.c.Del(fx.ctx(), fx.cfg.Prefix+":skus").Err(); err != nil {
			t.Fatal(err)
		}
		refused := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, redisstock.ErrLayout) || !errors.Is(err, stock.ErrUnavailable) {
				t.Errorf("%s on a state of layout 1: %v, want ErrLayout", what, err)
			}
		}
		refused("Deduct", fx.s.Deduct(fx.ctx(), ord("new", "u9", it("a", 1))))
		refused("PutOnSale", fx.s.PutOnSale(fx.ctx(), stock.Listing{SKU: "a", Units: 5, HoldTTL: time.Minute}))
		refused("Restock", fx.s.Restock(fx.ctx(), stock.Restock{OpID: "r1", SKU: "a", Units: 1}))
		_, err := fx.s.Rebuild(fx.ctx(), []redisstock.Rebuild{{Listing: stock.Listing{SKU: "a", Units: 5, HoldTTL: time.Minute}}})
		refused("Rebuild", err)
		fx.clock.Advance(2 * time.Minute) // h1 and p1 are due
		if err := fx.s.PutOnSale(fx.ctx(), stock.Listing{SKU: "c", Units: 1, HoldTTL: time.Minute}); err != nil {
			t.Fatal(err) // a registry again, naming c only
		}
		if err := fx.c.SAdd(fx.ctx(), fx.cfg.Prefix+":skus", "a").Err(); err != nil {
			t.Fatal(err)
		}
		_, err = fx.s.ReclaimExpired(fx.ctx(), 10)
		refused("ReclaimExpired", err)
		st := fx.c.HGetAll(fx.ctx(), fx.cfg.Prefix+":{a}:state").Val()
		if st["hold_ms"] != "60000" || st["hold"] != "" || st["avail"] != "7" || st["held"] != "2" {
			t.Fatalf("a's state of layout 1 changed: %v", st)
		}
		if n := fx.c.ZCard(fx.ctx(), fx.cfg.Prefix+":{a}:holds").Val(); n != 1 {
			t.Fatalf("a's holds of layout 1: %d, want h1 still there", n)
		}
	})
}
