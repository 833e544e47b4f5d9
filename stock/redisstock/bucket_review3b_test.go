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

// r3bIn is stock_bucket_in.lua, run by the tests below as the 'in' step of
// a refill that runs while another call reads the buckets.
var r3bIn = redis.NewScript(lua.Script("stock_bucket_in.lua"))

// r3bHook runs f once, before the first command or pipeline that match
// accepts, after arm. f may use the client (the hook is disarmed first).
type r3bHook struct {
	armed atomic.Bool
	match func(cmds []redis.Cmder) bool
	f     func()
}

func (h *r3bHook) arm(match func([]redis.Cmder) bool, f func()) {
	h.match, h.f = match, f
	h.armed.Store(true)
}

func (h *r3bHook) check(cmds []redis.Cmder) {
	if h.armed.Load() && h.match(cmds) && h.armed.CompareAndSwap(true, false) {
		h.f()
	}
}

// r3bHasKey matches a command batch one of whose commands names a key
// ending in suffix, by command name.
func r3bHasKey(name, suffix string) func([]redis.Cmder) bool {
	return func(cmds []redis.Cmder) bool {
		for _, c := range cmds {
			if !strings.EqualFold(c.Name(), name) {
				continue
			}
			for _, a := range c.Args()[1:] {
				if s, _ := a.(string); strings.HasSuffix(s, suffix) {
					return true
				}
			}
		}
		return false
	}
}

// r3bArrive runs the 'in' step of transfer id (units for bucket dest) at
// dest, as a refill's complete does: the units are added once, under the
// arrival marker.
func (fx *fixture) r3bArrive(dest, id string, units int64) {
	fx.t.Helper()
	ctx := context.Background()
	gen, err := fx.c.HGet(ctx, fx.bucketKey(dest, ":state"), "gen").Result()
	if err != nil {
		fx.t.Errorf("gen of %q: %v", dest, err)
		return
	}
	res, err := r3bIn.Run(ctx, fx.c, []string{fx.bucketKey(dest, ":state"), fx.bucketKey(dest, ":xi:"+id)},
		"in", time.Hour.Milliseconds(), units, gen).Slice()
	if err != nil || len(res) != 2 || res[1] != "in" {
		fx.t.Errorf("in step at %q = %v, %v", dest, res, err)
	}
}

// Promise (doc.go "# Buckets", snapshotBuckets; invariants 4 and 6): a
// correction computed from a Snapshot read while units moved between
// buckets is refused by the first bucket's Fence, "so a sum read while
// units were on their way is never applied".
//
// Sequence: 90 units in 3 buckets (30 each), the record has 90. A refill
// for the first bucket holds the lease (its 'take' moved the epoch already)
// and took 10 units out of bucket 1 (departure record written). Snapshot
// reads bucket 0 (30, Fence F), buckets 1 and 2 (20, 30); now the refill's
// 'in' adds the 10 units to bucket 0 (arrival marker 'in'); Snapshot reads
// the departure records and the markers: the record's marker says 'in', so
// its 10 units are not counted on their way either. Snapshot answers 80.
// The refill has not reached its 'tick' yet, so F is still the fence: the
// correction +10 a reconciler computes (record 90 - gate 80) is applied,
// and the gate offers 100 units of a record of 90. Snapshot, unlike
// bucketLevels, never reads the versions again, and 'in' does not move
// the epoch.
func TestReview3bSnapshotMissesArrivalAdjustApplied(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n, record = 3, 90
		h := &r3bHook{}
		fx.c.AddHook(checkHook(h.check))
		fx.bucketSale("hot", record, 0, time.Minute, n)
		names := redisstock.BucketNames("hot", n)
		const id = "r3b.0.1"
		if got, err := fx.s.BucketOut(ctx, "hot", n, 1, 0, id, 10); err != nil || got != 10 {
			t.Fatalf("BucketOut = %d, %v", got, err)
		}
		// The departure records are read after every bucket's snapshot.
		h.arm(r3bHasKey("hgetall", ":xo"), func() { fx.r3bArrive(names[0], id, 10) })
		sn, err := fx.s.Snapshot(ctx, []redisstock.SnapshotRequest{{SKU: "hot"}})
		if err != nil {
			t.Fatal(err)
		}
		if h.armed.Load() {
			t.Fatal("the 'in' step never ran during the Snapshot")
		}
		delta := record - sn[0].Available
		if sn[0].Available != record {
			t.Errorf("Snapshot Available = %d while 10 units moved from bucket 1 to bucket 0; the SKU has %d", sn[0].Available, record)
		}
		if delta != 0 {
			ok, err := fx.s.Adjust(ctx, "hot", sn[0].Fence, delta)
			if ok {
				t.Errorf("Adjust(%+d) computed from that Snapshot was applied under its Fence", delta)
			}
			if err != nil {
				t.Logf("Adjust: %v", err)
			}
		}
		if av, err := fx.s.Available(ctx, "hot"); err != nil || av > record {
			t.Errorf("Available after the correction = %d, %v; the record has %d (gate above record)", av, err, record)
		}
	})
}

// Promise (as above; a unit counted exactly once): the same seam the other
// way. A refill for bucket 1 holds the lease; Snapshot reads bucket 0 (30,
// Fence F); the refill takes 10 out of bucket 0 and they arrive at bucket
// 1 before Snapshot reads bucket 1 (40), the departure record's marker
// says 'in'. Snapshot answers 100: the 10 units are counted twice. The
// correction -10 (record 90) finds 20 in bucket 0, needs no gathering,
// and is applied under F: the gate drops to 80 units of a record of 90,
// and the next reconciler pass is needed to repair what this one broke.
func TestReview3bSnapshotCountsDepartureTwice(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n, record = 3, 90
		fx.loadScripts()
		h := &r3bHook{}
		fx.c.AddHook(checkHook(h.check))
		fx.bucketSale("hot", record, 0, time.Minute, n)
		names := redisstock.BucketNames("hot", n)
		// Snapshot reads the other buckets after the first: move the units
		// just before bucket 1's snapshot script.
		h.arm(r3bHasKey("evalsha", "{"+names[1]+"}:state"), func() {
			if got, err := fx.s.BucketOutIn(context.Background(), "hot", n, 0, 1, "r3b.0.0", 10); err != nil || got != 10 {
				t.Errorf("BucketOutIn = %d, %v", got, err)
			}
		})
		sn, err := fx.s.Snapshot(ctx, []redisstock.SnapshotRequest{{SKU: "hot"}})
		if err != nil {
			t.Fatal(err)
		}
		if h.armed.Load() {
			t.Fatal("the transfer never ran during the Snapshot")
		}
		if sn[0].Available != record {
			t.Errorf("Snapshot Available = %d while 10 units moved from bucket 0 to bucket 1; the SKU has %d", sn[0].Available, record)
		}
		if delta := record - sn[0].Available; delta != 0 {
			if ok, err := fx.s.Adjust(ctx, "hot", sn[0].Fence, delta); ok {
				t.Errorf("Adjust(%+d) computed from that Snapshot was applied under its Fence", delta)
			} else if err != nil {
				t.Logf("Adjust: %v", err)
			}
		}
		if av, err := fx.s.Available(ctx, "hot"); err != nil || av != record {
			t.Errorf("Available after the correction = %d, %v; the record has %d", av, err, record)
		}
	})
}

// Promise (invariant 3, no leak; Snapshot doc: a SKU read with a state the
// registry no longer names is added back so that ReclaimExpired returns
// its holds again). Coverage check: the registry's key is lost alone (its
// master lost its data); a Snapshot of the bucketed SKU (a reconciler
// pass) must put the buckets back, so a hold in bucket 1 is reclaimed at
// its deadline.
func TestReview3bRegistryLossBucketHoldReclaimed(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("hot", 90, 0, time.Minute, n)
		for home := range n {
			u := usersIn(n, home, 1, "r")[0]
			is(t, fx.s.Deduct(ctx, ord("o"+u, u, it("hot", 2))), nil, "Deduct")
		}
		if err := fx.c.Del(ctx, fx.cfg.Prefix+":skus").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := fx.s.Snapshot(ctx, []redisstock.SnapshotRequest{{SKU: "hot"}}); err != nil {
			t.Fatal(err)
		}
		fx.clock.Advance(2 * time.Minute)
		got, err := fx.s.ReclaimExpired(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Errorf("ReclaimExpired after the registry was lost and a Snapshot = %d holds, want %d", len(got), n)
		}
		fx.want("hot", 90, 0, 0)
	})
}

// r3bSameMaster returns a SKU name whose first bucket lives on the master
// that holds the counts hash (<prefix>:buckets).
func (fx *fixture) r3bSameMaster(tag string) string {
	fx.t.Helper()
	cc := fx.c.(*redis.ClusterClient)
	want, err := cc.MasterForKey(fx.ctx(), fx.cfg.Prefix+":buckets")
	if err != nil {
		fx.t.Fatal(err)
	}
	for k := 0; ; k++ {
		sku := tag + strconv.Itoa(k)
		m, err := cc.MasterForKey(fx.ctx(), fx.bucketKey(sku, ":state"))
		if err != nil {
			fx.t.Fatal(err)
		}
		if m.Options().Addr == want.Options().Addr {
			return sku
		}
	}
}

// Promise (doc.go "# Buckets": Rebuild "finds the bucket count in the
// surviving buckets' states or the counts hash when the first state is
// gone"; Sold out is exact; the per-user limit is exact across buckets).
//
// Sequence: a SKU of 90 units in 3 buckets, per-user limit 1; a user of
// bucket 1 buys its 1. The master holding the first bucket and the counts
// hash loses its data (every key of the first bucket's slot, and the
// counts hash). A reconciler's Rebuild finds the count 3 in the surviving
// buckets, writes the first state (no units: others survived), then stops
// before its separate HSET of bk on the first state. Now the first state
// exists without bk and no counts hash names the SKU: every Store reads it
// as a SKU of one bucket, for good (no reconciler rebuilds a state that
// exists; Rebuild never writes the counts hash back). Available says 0
// while the two surviving buckets have 59; an order is refused as sold
// out; the reconciler, reading 0, corrects the first bucket by +89 (the
// 59 stay stranded in buckets no Store routes to); and the user of bucket
// 1 is counted nowhere now, so it buys a second unit past its limit of 1.
func TestReview3bRebuildStopsBeforeCountCountsHashLost(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		sku := fx.r3bSameMaster("hot")
		fx.bucketSale(sku, 90, 1, time.Minute, n)
		u := usersIn(n, 1, 1, "u")[0]
		is(t, fx.s.Deduct(ctx, ord("o1", u, it(sku, 1))), nil, "Deduct of u's 1")
		fx.loseSlot(sku)
		if err := fx.c.Del(ctx, fx.cfg.Prefix+":buckets").Err(); err != nil {
			t.Fatal(err)
		}
		h := &skipHSetBK{key: fx.bucketKey(sku, ":state")}
		fx.c.AddHook(h)
		later := newStore(t, fx.c, fx.cfg)
		_, err := later.Rebuild(ctx, []redisstock.Rebuild{{Listing: stock.Listing{SKU: sku, Units: 89, PerUserLimit: 1, HoldTTL: time.Minute}}})
		if err == nil {
			t.Fatalf("Rebuild succeeded although its count write failed")
		}
		next := newStore(t, fx.c, fx.cfg)
		st, err := next.Inspect(ctx, []string{sku})
		if err != nil || !st[0].Exists {
			t.Fatalf("Inspect after the Rebuild = %+v, %v", st, err)
		}
		if st[0].Available != 59 {
			t.Errorf("Inspect after the Rebuild: available %d, want 59 (the two surviving buckets)", st[0].Available)
		}
		// The reconciler's correction: the lost first bucket's 30.
		if ok, err := next.Adjust(ctx, sku, st[0].Fence, 89-st[0].Available); !ok || err != nil {
			t.Fatalf("Adjust = %v, %v", ok, err)
		}
		if err := next.Deduct(ctx, ord("o2", u, it(sku, 1))); err == nil {
			t.Errorf("user %s with a limit of 1 (its 1 held in bucket 1) took a second unit after the Rebuild", u)
		}
	})
}
