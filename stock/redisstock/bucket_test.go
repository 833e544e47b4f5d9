package redisstock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/keyslot"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// split is a Store whose PutOnSale splits every SKU into buckets unless
// the listing says otherwise.
type split struct {
	*redisstock.Store
	n int
}

func (s split) PutOnSale(ctx context.Context, l stock.Listing) error {
	if l.Buckets == 0 {
		l.Buckets = s.n
	}
	return s.Store.PutOnSale(ctx, l)
}

func TestConformanceBuckets(t *testing.T) {
	for _, b := range backends() {
		if !strings.Contains(b.name, "cluster") {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			stocktest.Run(t, func(t *testing.T, clock stock.Clock) stock.Manager {
				c, _ := b.client(t)
				return split{newStore(t, c, redisstock.Config{Clock: clock}), 3}
			})
		})
	}
}

// TestBucketsOnDistinctMasters checks the placement promise: on a
// Cluster whose masters own the slot ranges redis-cli --cluster create
// assigns, B buckets of a SKU on B masters are one per master, for every
// SKU (including those whose own slot sits at a range's edge).
func TestBucketsOnDistinctMasters(t *testing.T) {
	// redis-cli's ranges for 3 masters, as CLUSTER SHARDS shows them.
	three := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	master := func(slot int) int {
		for m, r := range three {
			if slot >= r[0] && slot <= r[1] {
				return m
			}
		}
		return -1
	}
	check := func(sku string) {
		t.Helper()
		names := redisstock.BucketNames(sku, 3)
		seen := map[int]string{}
		for _, name := range names {
			m := master(keyslot.Slot(name))
			if other, dup := seen[m]; dup {
				t.Fatalf("SKU %q: buckets %q and %q on master %d", sku, other, name, m)
			}
			seen[m] = name
		}
	}
	for i := range 30000 {
		check("sku" + strconv.Itoa(i))
	}
	// SKUs at the ranges' edges: the slots redis-cli rounds.
	for _, edge := range []int{0, 5460, 5461, 10922, 10923, 16383} {
		for i := 0; ; i++ {
			if sku := "e" + strconv.Itoa(i); keyslot.Slot(sku) == edge {
				check(sku)
				break
			}
		}
	}
	t.Run("cluster", func(t *testing.T) {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(testdb.Need(t, testdb.Cluster), ",")})
		defer c.Close()
		shards, err := c.ClusterShards(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(shards) != 3 {
			t.Skipf("the Cluster has %d masters, not 3", len(shards))
		}
		for _, sku := range []string{"hot", "sku15273", "sku28555", "phone"} {
			names := redisstock.BucketNames(sku, 3)
			masters := map[string]bool{}
			for _, name := range names {
				slot := keyslot.Slot(name)
				for _, sh := range shards {
					for _, r := range sh.Slots {
						if int64(slot) >= r.Start && int64(slot) <= r.End {
							masters[sh.Nodes[0].ID] = true
						}
					}
				}
			}
			if len(masters) != 3 {
				t.Errorf("SKU %q: its 3 buckets are on %d masters", sku, len(masters))
			}
		}
	})
}

// onceBefore runs f once, before the first command (alone or in a
// pipeline) that calls the script whose SHA1 is hash.
type onceBefore struct {
	hash string
	once sync.Once
	f    func()
}

func (h *onceBefore) check(cmds []redis.Cmder) {
	for _, c := range cmds {
		for _, a := range c.Args() {
			if s, _ := a.(string); s == h.hash {
				h.once.Do(h.f)
				return
			}
		}
	}
}

// checkHook shows check every command, and every pipeline, before it is
// sent: the hook of the tests' call hooks (onceBefore and the like).
type checkHook func(cmds []redis.Cmder)

func (f checkHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f checkHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (f checkHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		f(cmds)
		return next(ctx, cmds)
	}
}

// A refill that takes from the same bucket in two rounds (the bucket was
// drained under the first move and refilled by a revert before the
// second) moves each round's units: every unit stays counted.
func TestBucketRefillTwoRoundsFromOneBucket(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("hot", 39, 0, time.Minute, n) // 13 per bucket
		home, a, c := usersIn(n, 0, 1, "h")[0], usersIn(n, 1, 1, "a")[0], usersIn(n, 2, 1, "c")[0]
		is(t, fx.s.Deduct(ctx, ord("h-0", home, it("hot", 13))), nil, "Deduct of bucket 0's units")
		is(t, fx.s.Deduct(ctx, ord("c-0", c, it("hot", 13))), nil, "Deduct of bucket 2's units")
		// The refill of bucket 0 plans units from bucket 1; a buyer there
		// takes 10 of them before they leave, and gives them back before
		// the first move arrives, so the next round takes from bucket 1
		// again.
		var drained, reverted error
		fx.loadScripts()
		fx.c.AddHook(checkHook((&onceBefore{hash: redisstock.BucketOutScriptHash(), f: func() { drained = fx.s.Deduct(ctx, ord("a-0", a, it("hot", 10))) }}).check))
		fx.c.AddHook(checkHook((&onceBefore{hash: redisstock.BucketInScriptHash(), f: func() { reverted = fx.s.Revert(ctx, "a-0") }}).check))
		is(t, fx.s.Deduct(ctx, ord("h-1", home, it("hot", 8))), nil, "Deduct of 8 for bucket 0")
		is(t, drained, nil, "Deduct draining bucket 1 during the refill")
		is(t, reverted, nil, "Revert refilling bucket 1 during the refill")
		fx.want("hot", 39-26-8, 26+8, 0)
	})
}

// PutOnSaleMany splits and overwrites a SKU in buckets as PutOnSale does:
// the units are the listing's, not the listing's on one bucket plus what
// the others had.
func TestBucketPutOnSaleMany(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		put := func(units int64, buckets int) {
			t.Helper()
			err := fx.s.PutOnSaleMany(ctx, []stock.Listing{{SKU: "hot", Units: units, Buckets: buckets}, {SKU: "cold", Units: 5}})
			is(t, err, nil, "PutOnSaleMany")
		}
		put(30, 3)
		fx.want("hot", 30, 0, 0)
		fx.want("cold", 5, 0, 0)
		if av := fx.bucketAvail("hot", 3); av[0] != 10 || av[1] != 10 || av[2] != 10 {
			t.Fatalf("bucket avail = %v, want [10 10 10]", av)
		}
		is(t, fx.s.Deduct(ctx, ord("o1", "u1", it("hot", 4))), nil, "Deduct")
		put(21, 0) // keeps the count, overwrites every bucket's units
		fx.want("hot", 21, 4, 0)
		is(t, fx.s.PutOnSaleMany(ctx, []stock.Listing{{SKU: "hot", Units: 9, Buckets: 2}}), stock.ErrInvalid, "PutOnSaleMany with another count")
		fx.want("hot", 21, 4, 0)
	})
}

// A Deduct that waits for another's refill in the same process takes that
// refill's sold out only for a line the SKU could not cover at the instant
// it proved it: a smaller line, which the SKU can still take, is tried
// again and taken.
func TestBucketWaiterTakesOnlyASoldOutThatCoversIt(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("hot", 39, 0, time.Minute, n) // 13 per bucket
		big, small, c := usersIn(n, 0, 1, "b")[0], usersIn(n, 1, 1, "s")[0], usersIn(n, 2, 1, "c")[0]
		is(t, fx.s.Deduct(ctx, ord("b-0", big, it("hot", 13))), nil, "Deduct of bucket 0's units")
		is(t, fx.s.Deduct(ctx, ord("s-0", small, it("hot", 13))), nil, "Deduct of bucket 1's units")
		is(t, fx.s.Deduct(ctx, ord("c-0", c, it("hot", 10))), nil, "Deduct of 10 of bucket 2's units")
		// The big order's refill takes the lease; meanwhile the small one
		// finds its bucket empty and waits for that refill.
		var wg sync.WaitGroup
		var smallErr error
		fx.loadScripts()
		fx.c.AddHook(checkHook((&onceBefore{hash: redisstock.BucketLeaseScriptHash(), f: func() {
			wg.Go(func() { smallErr = fx.s.Deduct(ctx, ord("s-1", small, it("hot", 2))) })
			time.Sleep(50 * time.Millisecond)
		}}).check))
		is(t, fx.s.Deduct(ctx, ord("b-1", big, it("hot", 5))), stock.ErrSoldOut, "Deduct of 5 with 3 left")
		wg.Wait()
		is(t, smallErr, nil, "Deduct of 2 with 3 left, waiting on the refill that found 3")
		fx.want("hot", 1, 38, 0)
	})
}
