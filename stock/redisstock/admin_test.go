package redisstock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// lose deletes every key of the fixture's Store, as a FLUSHALL or a restart
// without persistence would (on a shared real server only the test's keys).
func (fx *fixture) lose() {
	fx.t.Helper()
	if fx.mini != nil {
		fx.mini.FlushAll()
		return
	}
	del := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, fx.cfg.Prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := c.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	var err error
	switch c := fx.c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(fx.ctx(), del)
	case *redis.Client:
		err = del(fx.ctx(), c)
	}
	if err != nil {
		fx.t.Fatalf("lose the keys: %v", err)
	}
}

func (fx *fixture) fence(sku string) redisstock.Fence {
	fx.t.Helper()
	st, err := fx.s.Inspect(fx.ctx(), []string{sku})
	if err != nil {
		fx.t.Fatal(err)
	}
	return st[0].Fence
}

// A state recreated after a flush reaches the same epoch as the one before,
// but never the same fence: a correction computed before the flush is
// refused after the rebuild.
func TestFenceNeverRepeatsAcrossFlushAndRebuild(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, 0)
		before := fx.fence("a")
		fx.lose()
		got, err := fx.s.Rebuild(fx.ctx(), []redisstock.Rebuild{{Listing: stock.Listing{SKU: "a", Units: 15}}})
		if err != nil || len(got) != 1 || got[0] != redisstock.Applied {
			t.Fatalf("Rebuild = %v, %v; want Applied", got, err)
		}
		after := fx.fence("a")
		if after.Epoch != before.Epoch || after.Gen == before.Gen || len(after.Gen) != 32 {
			t.Fatalf("fence %+v before the flush, %+v after the rebuild: want the same epoch, another generation", before, after)
		}
		applied, err := fx.s.Adjust(fx.ctx(), "a", before, 5)
		if err != nil || applied {
			t.Fatalf("Adjust with the fence from before the flush = %v, %v; want refused", applied, err)
		}
		fx.want("a", 15, 0, 0)
		// PutOnSale of a lost SKU draws a new generation too.
		fx.lose()
		fx.sale("a", 15, 0, 0)
		if f := fx.fence("a"); f == after || f.Gen == after.Gen {
			t.Fatalf("fence %+v after a flush and PutOnSale repeats %+v", f, after)
		}
		applied, err = fx.s.Adjust(fx.ctx(), "a", after, 5)
		if err != nil || applied {
			t.Fatalf("Adjust with the fence of the rebuilt state = %v, %v; want refused", applied, err)
		}
		applied, err = fx.s.Adjust(fx.ctx(), "a", fx.fence("a"), 5)
		if err != nil || !applied {
			t.Fatalf("Adjust with the current fence = %v, %v; want applied", applied, err)
		}
		fx.want("a", 20, 0, 0)
	})
}

// Rebuild creates only: a state that exists, with its live holds, is left
// alone, and a created state counts the restocks it was given as applied.
func TestRebuildCreatesOnlyAndMarksOps(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, 0)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "", it("a", 4))), nil, "Deduct")
		got, err := fx.s.Rebuild(fx.ctx(), []redisstock.Rebuild{
			{Listing: stock.Listing{SKU: "a", Units: 10}},
			{Listing: stock.Listing{SKU: "b", Units: 15, PerUserLimit: 2, HoldTTL: time.Minute}, Ops: []string{"d1"}},
		})
		if err != nil || len(got) != 2 || got[0] != redisstock.Exists || got[1] != redisstock.Applied {
			t.Fatalf("Rebuild = %v, %v; want [Exists Applied]", got, err)
		}
		fx.want("a", 6, 4, 0)
		fx.want("b", 15, 0, 0)
		if lv, _ := fx.s.Levels(fx.ctx(), "b"); lv.PerUserLimit != 2 || lv.HoldTTL != time.Minute {
			t.Fatalf("rebuilt settings %+v", lv)
		}
		is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "d1", SKU: "b", Units: 5}), nil, "Restock the rebuild counted")
		fx.want("b", 15, 0, 0)
		is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "d2", SKU: "b", Units: 5}), nil, "a new Restock")
		fx.want("b", 20, 0, 0)
		sn, err := fx.s.Snapshot(fx.ctx(), []redisstock.SnapshotRequest{{SKU: "b", Ops: []string{"d1", "d2", "d3"}}})
		if err != nil || len(sn) != 1 || len(sn[0].OpsApplied) != 3 || !sn[0].OpsApplied[0] || !sn[0].OpsApplied[1] || sn[0].OpsApplied[2] {
			t.Fatalf("Snapshot = %+v, %v; want ops [true true false]", sn, err)
		}
		if sn[0].Fence != fx.fence("b") {
			t.Fatalf("Snapshot fence %+v, Inspect %+v", sn[0].Fence, fx.fence("b"))
		}
		// A Rebuild repeated after the state exists changes nothing.
		got, err = fx.s.Rebuild(fx.ctx(), []redisstock.Rebuild{{Listing: stock.Listing{SKU: "b", Units: 15}}})
		if err != nil || got[0] != redisstock.Exists {
			t.Fatalf("repeated Rebuild = %v, %v; want Exists", got, err)
		}
		fx.want("b", 20, 0, 0)
	})
}

// Relist writes only over the fence it was computed from and, unless
// forced, only while nothing is held, in the script itself.
func TestRelistIsFencedAndRefusesLiveHolds(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, 0)
		fx.sale("b", 10, 0, 0)
		fa, fb := fx.fence("a"), fx.fence("b")
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "", it("b", 1))), nil, "Deduct")
		rl := func(sku string, f redisstock.Fence, delta int64, force bool) redisstock.Relist {
			return redisstock.Relist{SKU: sku, Fence: f, Delta: delta, PerUserLimit: 3, HoldTTL: time.Minute, Force: force}
		}
		got, err := fx.s.Relist(fx.ctx(), []redisstock.Relist{
			rl("a", fa, 2, false), rl("b", fb, 2, false), rl("c", redisstock.Fence{}, 1, false),
			rl("a", fa, 2, false), rl("b", fb, -20, true),
		})
		want := []redisstock.Outcome{redisstock.Applied, redisstock.HasHolds, redisstock.Absent, redisstock.Moved, redisstock.OutOfRange}
		if err != nil || len(got) != len(want) {
			t.Fatalf("Relist = %v, %v; want %v", got, err, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("Relist = %v; want %v", got, want)
			}
		}
		fx.want("a", 12, 0, 0)
		fx.want("b", 9, 1, 0)
		if lv, _ := fx.s.Levels(fx.ctx(), "a"); lv.PerUserLimit != 3 || lv.HoldTTL != time.Minute {
			t.Fatalf("relisted settings %+v", lv)
		}
		got, err = fx.s.Relist(fx.ctx(), []redisstock.Relist{rl("b", fb, 2, true)})
		if err != nil || got[0] != redisstock.Applied {
			t.Fatalf("forced Relist = %v, %v; want Applied", got, err)
		}
		fx.want("b", 11, 1, 0)
	})
}

// Nothing is sent with a context already done: a plain context error, not
// an unknown outcome; after sending, every failure is an unknown outcome.
func TestAdminCanceledContextSendsNothing(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, 0)
		f := fx.fence("a")
		ctx, cancel := context.WithCancel(fx.ctx())
		cancel()
		_, adjustErr := fx.s.Adjust(ctx, "a", f, 1)
		_, rebuildErr := fx.s.Rebuild(ctx, []redisstock.Rebuild{{Listing: stock.Listing{SKU: "b", Units: 1}}})
		_, relistErr := fx.s.Relist(ctx, []redisstock.Relist{{SKU: "a", Fence: f, Delta: 1}})
		for what, err := range map[string]error{
			"PutOnSale":     fx.s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 1}),
			"PutOnSaleMany": fx.s.PutOnSaleMany(ctx, []stock.Listing{{SKU: "a", Units: 1}}),
			"Restock":       fx.s.Restock(ctx, stock.Restock{OpID: "late", SKU: "a", Units: 5}),
			"Adjust":        adjustErr,
			"Rebuild":       rebuildErr,
			"Relist":        relistErr,
			"Mark":          fx.s.Mark(ctx),
		} {
			if !errors.Is(err, context.Canceled) || errors.Is(err, stock.ErrUnknownOutcome) || stock.IsBusiness(err) {
				t.Errorf("%s with a canceled context: %v; want a plain context error", what, err)
			}
		}
		fx.want("a", 10, 0, 0)
		if fx.fence("a") != f {
			t.Fatal("a call with a canceled context moved the fence")
		}
		is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "late", SKU: "a", Units: 5}), nil, "the Restock the canceled call named")
		fx.want("a", 15, 0, 0)

		fx.hook.arm(0, 1, false)
		unknown(t, fx.s.PutOnSale(fx.ctx(), stock.Listing{SKU: "a", Units: 7}), "PutOnSale with a lost reply")
		fx.hook.arm(0, 1, false)
		_, err := fx.s.Rebuild(fx.ctx(), []redisstock.Rebuild{{Listing: stock.Listing{SKU: "b", Units: 1}}})
		unknown(t, err, "Rebuild with a lost reply")
		fx.hook.arm(0, 1, false)
		_, err = fx.s.Adjust(fx.ctx(), "a", fx.fence("a"), 1)
		unknown(t, err, "Adjust with a lost reply")
	})
}

// A restock of a SKU whose state the gate lost is an unavailable gate, not
// an unknown SKU; a SKU never put on sale is unknown. Neither binds the
// operation ID.
func TestRestockOfLostSKUIsUnavailable(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, 0)
		is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "d1", SKU: "nope", Units: 1}), stock.ErrUnknownSKU, "Restock of a SKU never on sale")
		is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "d1", SKU: "a", Units: 1}), nil, "the ID is free again")
		fx.want("a", 11, 0, 0)
		fx.lose()
		err := fx.s.Restock(fx.ctx(), stock.Restock{OpID: "d2", SKU: "a", Units: 2})
		if !errors.Is(err, stock.ErrUnavailable) || stock.IsBusiness(err) || errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("Restock of a lost SKU: %v; want ErrUnavailable only", err)
		}
		fx.sale("b", 1, 0, 0) // the registry is back, without a
		is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "d2", SKU: "b", Units: 2}), nil, "the ID is free again")
		fx.want("b", 3, 0, 0)
	})
}
