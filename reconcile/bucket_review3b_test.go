package reconcile_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// r3bClusterPairs are the gate + record combinations on a Cluster client
// (where a SKU can be split into buckets): miniredis behind a
// ClusterClient always, the real Cluster when STOCKGUARD_REDIS_CLUSTER is
// set; both with SQLite.
func r3bClusterPairs() []pair {
	sqlite := func(t testing.TB) (*sqlx.DB, sqlstock.Dialect) { return testdb.SQLite(t, 16), sqlstock.SQLite }
	return []pair{{name: "miniredis-cluster+sqlite", record: sqlite,
		redis: func(t testing.TB) (redis.UniversalClient, *miniredis.Miniredis) {
			m := miniredis.RunT(t)
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{m.Addr()}})
			t.Cleanup(func() { c.Close() })
			return c, m
		}}, {name: "cluster+sqlite", needs: []testdb.Server{testdb.Cluster}, record: sqlite,
		redis: func(t testing.TB) (redis.UniversalClient, *miniredis.Miniredis) {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(testdb.Need(t, testdb.Cluster), ",")})
			t.Cleanup(func() { c.Close() })
			return c, nil
		}}}
}

// r3bStall blocks, once each, the refill's 'in' step (until released) and
// its lease 'tick' (until released), and lets a test run something just
// before the first pipeline made only of HGETALLs of departure records
// (Snapshot's read of them, after every bucket's own snapshot).
type r3bStall struct {
	inHash, leaseHash string
	atIn, goIn        chan struct{}
	atTick, goTick    chan struct{}
	inOnce, tickOnce  atomic.Bool
	snapArmed         atomic.Bool
	onSnap            func()
}

func newR3bStall() *r3bStall {
	return &r3bStall{
		inHash:    redis.NewScript(lua.Script("stock_bucket_in.lua")).Hash(),
		leaseHash: redis.NewScript(lua.Script("stock_bucket_lease.lua")).Hash(),
		atIn:      make(chan struct{}), goIn: make(chan struct{}),
		atTick: make(chan struct{}), goTick: make(chan struct{}),
	}
}

func (h *r3bStall) check(cmds []redis.Cmder) {
	allXO := len(cmds) > 0
	for _, c := range cmds {
		args := c.Args()
		name := strings.ToLower(c.Name())
		if name == "evalsha" && len(args) > 1 {
			sha, _ := args[1].(string)
			if sha == h.inHash && h.inOnce.CompareAndSwap(false, true) {
				close(h.atIn)
				<-h.goIn
			}
			if sha == h.leaseHash {
				for _, a := range args {
					if s, _ := a.(string); s == "tick" && h.tickOnce.CompareAndSwap(false, true) {
						close(h.atTick)
						<-h.goTick
					}
				}
			}
		}
		if name != "hgetall" || len(args) < 2 {
			allXO = false
		} else if k, _ := args[1].(string); !strings.HasSuffix(k, ":xo") {
			allXO = false
		}
	}
	if allXO && h.snapArmed.CompareAndSwap(true, false) {
		h.onSnap()
	}
}

func (h *r3bStall) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *r3bStall) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.check([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *r3bStall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.check(cmds)
		return next(ctx, cmds)
	}
}

// Promise (invariant 6, gate bound; reconcile doc: "an administrative
// write between t0 and t4 moves the fence, so the Adjust is refused";
// redisstock doc "# Buckets": a fenced correction computed from counts
// read while units moved is refused).
//
// Sequence, in the tiered flow on a Cluster client, one SKU of 90 units in
// 3 buckets (30 each): user u buys 30 (its bucket is empty now) and pays.
// u orders 5 more: its bucket cannot take them, so the Deduct runs a refill
// (lease 'take': the epoch moves; 'out': 10 units leave each other bucket,
// departure records written) and is slow before its 'in' step. WarmUp runs
// (record 60, gate 60, nothing held): Inspect reads the Fence; Snapshot
// reads bucket 0, 1 and 2 (20 units in the two givers, 0 in the
// destination); the refill's 'in' lands (20 units arrive, markers 'in') and
// it is slow again before its 'tick'; Snapshot reads the departure records
// and their markers ('in': not on their way either) and answers 40. WarmUp
// has one reading only: it relists with Delta +20 under the Fence it read,
// which the 'in' step did not move, and Relist applies it. The refill
// ends, the order takes its 5: the gate offers 75 units, the record 55.
func TestReview3bWarmUpDuringRefillOvershoots(t *testing.T) {
	for _, p := range r3bClusterPairs() {
		t.Run(p.name, func(t *testing.T) {
			testdb.Need(t, p.needs...)
			w := newWorld(t, p, reconcile.Config{})
			h := newR3bStall()
			w.rc.AddHook(h)
			ctx := w.ctx
			const sku = "hot"
			w.must(w.flow.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 90, HoldTTL: time.Minute, Buckets: 3}), "PutOnSale")
			u := stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: sku, Qty: 30}}}
			w.must(w.flow.Deduct(ctx, u), "Deduct of u's bucket's 30")
			w.must(w.flow.Confirm(ctx, "o1"), "Confirm o1")
			done := make(chan error, 1)
			go func() {
				done <- w.flow.Deduct(context.Background(), stock.Order{ID: "o2", UserID: "u", Items: []stock.Item{{SKU: sku, Qty: 5}}})
			}()
			select {
			case <-h.atIn:
			case <-time.After(10 * time.Second):
				t.Fatal("the Deduct never reached a refill's 'in' step")
			}
			h.onSnap = func() {
				close(h.goIn)
				select {
				case <-h.atTick:
				case <-time.After(10 * time.Second):
					t.Error("the refill never reached its 'tick'")
				}
			}
			h.snapArmed.Store(true)
			rep, werr := w.rec.WarmUp(ctx, []string{sku}, false)
			if h.snapArmed.Load() {
				t.Error("WarmUp's Snapshot never read the departure records")
			}
			close(h.goTick)
			if err := <-done; err != nil {
				t.Fatalf("Deduct o2: %v", err)
			}
			t.Logf("WarmUp: %+v, %v", rep, werr)
			g, r := w.levels(sku)
			if g.Available > r.Available {
				t.Errorf("after WarmUp and the Deduct: gate available %d > record available %d (nothing in flight)", g.Available, r.Available)
			}
		})
	}
}

// r3bBuckets returns the names of sku's buckets found in the gate's keys,
// by bucket number (the first is the SKU), and each bucket's available
// units.
func (w *world) r3bBuckets(sku string, n int) ([]string, []int64) {
	w.t.Helper()
	cc := w.rc.(*redis.ClusterClient)
	names := make([]string, n)
	names[0] = sku
	var mu sync.Mutex
	err := cc.ForEachMaster(w.ctx, func(ctx context.Context, m *redis.Client) error {
		keys, err := m.Keys(ctx, w.prefix+":{"+sku+" *}:state").Result()
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			name := strings.TrimSuffix(strings.TrimPrefix(k, w.prefix+":{"), "}:state")
			i, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(name, sku+" "), ".", 2)[0])
			if err == nil && i > 0 && i < n {
				names[i] = name
			}
		}
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
	avail := make([]int64, n)
	for i, name := range names {
		if name == "" {
			w.t.Fatalf("bucket %d of %q not found", i, sku)
		}
		avail[i], err = w.rc.HGet(w.ctx, w.prefix+":{"+name+"}:state", "avail").Int64()
		if err != nil {
			w.t.Fatalf("bucket %q: %v", name, err)
		}
	}
	return names, avail
}

// r3bLoseSlot deletes every key of hash tag {name} (its master lost its
// data).
func (w *world) r3bLoseSlot(name string) {
	w.t.Helper()
	cc := w.rc.(*redis.ClusterClient)
	err := cc.ForEachMaster(w.ctx, func(ctx context.Context, m *redis.Client) error {
		keys, err := m.Keys(ctx, w.prefix+":{"+name+"}*").Result()
		for _, k := range keys {
			if err := m.Del(ctx, k).Err(); err != nil {
				return err
			}
		}
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

// Promise (invariant 6, gate bound, and 4, agreement after a pass; the
// Buckets doc: "every unit counts once whatever step a refill stopped
// at", a fenced correction computed while units moved is refused).
//
// Sequence, tiered flow on a Cluster client, 90 units in 3 buckets (30
// each): user u empties its bucket h (30, paid). u orders 5 more: the
// refill takes the lease (epoch moves), takes 10 out of each other bucket
// (departure records there) and is slow before its 'in' step. Now the
// master of one giver g (not the first bucket) loses its data: g's 20
// units and its departure record are gone, the 10 units g gave live only
// in the refill's memory. A Repair reads the SKU twice: 0 (h) + 20 (the
// other giver) + 10 (its departure) + 0 (g) = 30, record 60, both
// readings agree: Adjust +30 under the fence the lease's 'take' set, which
// nothing moved since, is applied (gate 60). The refill goes on: its 'in'
// adds the 20 units of both departures to h, g's 10 among them. The order
// takes its 5: gate 65, record 55 - the gate sells 10 units the record
// does not have.
func TestReview3bRepairWhileGiverLostOvershoots(t *testing.T) {
	for _, p := range r3bClusterPairs() {
		t.Run(p.name, func(t *testing.T) {
			testdb.Need(t, p.needs...)
			w := newWorld(t, p, reconcile.Config{})
			h := newR3bStall()
			h.tickOnce.Store(true) // the tick is not stalled
			w.rc.AddHook(h)
			ctx := w.ctx
			const sku, n = "hot", 3
			w.must(w.flow.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 90, HoldTTL: time.Minute, Buckets: n}), "PutOnSale")
			w.must(w.flow.Deduct(ctx, stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: sku, Qty: 30}}}), "Deduct o1")
			w.must(w.flow.Confirm(ctx, "o1"), "Confirm o1")
			names, avail := w.r3bBuckets(sku, n)
			home := slices.Index(avail, 0)
			if home < 0 {
				t.Fatalf("no bucket emptied: %v", avail)
			}
			lost := 1
			if home == 1 {
				lost = 2
			}
			done := make(chan error, 1)
			go func() {
				done <- w.flow.Deduct(context.Background(), stock.Order{ID: "o2", UserID: "u", Items: []stock.Item{{SKU: sku, Qty: 5}}})
			}()
			select {
			case <-h.atIn:
			case <-time.After(10 * time.Second):
				t.Fatal("the Deduct never reached a refill's 'in' step")
			}
			w.r3bLoseSlot(names[lost])
			rep, rerr := w.rec.Repair(ctx, []string{sku})
			t.Logf("Repair: %+v, %v", rep, rerr)
			close(h.goIn)
			if err := <-done; err != nil {
				t.Fatalf("Deduct o2: %v", err)
			}
			g, r := w.levels(sku)
			if g.Available > r.Available {
				t.Errorf("after the Repair and the Deduct: gate available %d > record available %d (nothing in flight)", g.Available, r.Available)
			}
		})
	}
}
