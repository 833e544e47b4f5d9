package redisstock_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// bumpXV bumps a bucket's transfer count before every read of the
// departure records, as a refill's steps would: every reading of a
// Snapshot then overlaps a transfer step.
type bumpXV struct {
	c     redis.UniversalClient
	key   string
	on    atomic.Bool
	bumps atomic.Int64
}

func (h *bumpXV) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *bumpXV) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *bumpXV) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if !h.on.Load() || len(c.Args()) < 2 {
				break
			}
			if k, _ := c.Args()[1].(string); c.Name() == "hgetall" && strings.HasSuffix(k, ":xo") {
				if err := h.c.HIncrBy(ctx, h.key, "xv", 1).Err(); err != nil {
					return err
				}
				h.bumps.Add(1)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// A Snapshot of a split SKU whose buckets never stop moving units answers
// its last reading with a Fence no state has: a correction computed from
// it is never applied (a reconciler reads the SKU again later), and the
// Snapshot does not fail the other SKUs read with it.
func TestBucketSnapshotWhileTransfersKeepComingIsFencedOff(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		fx.bucketSale("hot", 90, 0, time.Minute, 3)
		fx.sale("plain", 10, 0, 0)
		names := redisstock.BucketNames("hot", 3)
		h := &bumpXV{c: fx.c, key: fx.cfg.Prefix + ":{" + names[1] + "}:state"}
		h.on.Store(true)
		fx.c.AddHook(h)
		sn, err := fx.s.Snapshot(ctx, []redisstock.SnapshotRequest{{SKU: "hot"}, {SKU: "plain"}})
		if err != nil {
			t.Fatal(err)
		}
		if h.bumps.Load() < 2 {
			t.Fatalf("the hook bumped the transfer count %d times", h.bumps.Load())
		}
		if sn[0].Fence != (redisstock.Fence{}) {
			t.Fatalf("Snapshot of a SKU whose every reading overlapped a transfer: Fence %+v, want the zero Fence", sn[0].Fence)
		}
		if sn[1].Fence == (redisstock.Fence{}) || sn[1].Available != 10 {
			t.Fatalf("the plain SKU read with it: %+v", sn[1])
		}
		if ok, err := fx.s.Adjust(ctx, "hot", sn[0].Fence, 5); ok || err != nil {
			t.Fatalf("Adjust under the zero Fence: applied %v, %v; want not applied", ok, err)
		}
		h.on.Store(false)
		sn, err = fx.s.Snapshot(ctx, []redisstock.SnapshotRequest{{SKU: "hot"}})
		if err != nil {
			t.Fatal(err)
		}
		if sn[0].Fence == (redisstock.Fence{}) || sn[0].Available != 90 {
			t.Fatalf("Snapshot once the transfers stopped: %+v", sn[0])
		}
	})
}

// A Rebuild on a Cluster of many SKUs, none split, sends their rebuild
// scripts together (bounded cost: a warm-up of a fresh gate rebuilds
// every SKU), not one round trip per SKU; and a split SKU among them
// does not change the others' outcomes.
func TestRebuildOfUnsplitSKUsIsBatchedOnACluster(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		fx.bucketSale("hot", 30, 0, time.Minute, 3)
		fx.loadScripts()
		sha := redis.NewScript(lua.Script("stock_rebuild.lua")).Hash()
		var trips atomic.Int64
		fx.c.AddHook(checkHook(func(cmds []redis.Cmder) {
			for _, c := range cmds {
				if a := c.Args(); c.Name() == "evalsha" && len(a) > 1 && a[1] == sha {
					trips.Add(1)
					return
				}
			}
		}))
		rs := make([]redisstock.Rebuild, 0, 21)
		for i := range 20 {
			rs = append(rs, redisstock.Rebuild{Listing: stock.Listing{SKU: "r" + strconv.Itoa(i), Units: 5}})
		}
		rs = append(rs, redisstock.Rebuild{Listing: stock.Listing{SKU: "hot", Units: 30, HoldTTL: time.Minute}})
		got, err := fx.s.Rebuild(ctx, rs)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range got[:20] {
			if o != redisstock.Applied {
				t.Fatalf("Rebuild of r%d: %v, want Applied", i, o)
			}
		}
		if len(got) != 21 || got[20] != redisstock.Exists {
			t.Fatalf("Rebuild outcomes %v: want 21, the split SKU's Exists", got)
		}
		if n := trips.Load(); n > 2 {
			t.Fatalf("the rebuild of 20 unsplit SKUs took %d round trips", n)
		}
		for i := range 20 {
			fx.want("r"+strconv.Itoa(i), 5, 0, 0)
		}
	})
}
