package redisstock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A SKU split into buckets by one process while another process still
// holds its count of one (read less than a second before) would have the
// second process send every order to the first bucket: the per-user limit
// counted in two buckets, Available counting one bucket, an order larger
// than the first bucket refused as sold out with every other bucket full.
// So a SKU that has a state is never split; a new SKU is, and every
// process reads its count before its first order.
func TestReviewBucketStaleCountOtherProcess(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 4
		other := newStore(t, fx.c, fx.cfg) // another process, same gate
		fx.sale("a", 100, 0, time.Minute)  // one bucket, no limit yet
		// The other process sells one unit, with no user, and cancels it:
		// it knows "a" as one bucket now; nothing is held, no user counted.
		is(t, other.Deduct(ctx, ord("warm", "", it("a", 1))), nil, "Deduct by the other process")
		is(t, other.Revert(ctx, "warm"), nil, "Revert by the other process")
		err := fx.s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 100, PerUserLimit: 1, HoldTTL: time.Minute, Buckets: n})
		is(t, err, stock.ErrInvalid, "splitting a SKU that has a state")
		fx.want("a", 100, 0, 0)
		// A new SKU, split from its first listing, as both processes see it.
		is(t, other.Deduct(ctx, ord("warm-b", "", it("b", 1))), stock.ErrUnknownSKU, "Deduct of a SKU not on sale yet")
		fx.bucketSale("b", 100, 1, time.Minute, n)
		if av, err := other.Available(ctx, "b"); err != nil || av != 100 {
			t.Errorf("Available of b from the other process = %d, %v; want 100", av, err)
		}
		u := usersIn(n, 1, 1, "u")[0]
		e1 := fx.s.Deduct(ctx, ord("o1-b", u, it("b", 1)))
		e2 := other.Deduct(ctx, ord("o2-b", u, it("b", 1)))
		if e1 != nil || !errors.Is(e2, stock.ErrLimitReached) {
			t.Errorf("user %s with a limit of 1: first Deduct %v, second (other process) %v; want nil and the limit", u, e1, e2)
		}
	})
}

// skipHSetBK fails, without sending it, the first HSET of field bk on key
// once armed: a process that stops right after a script, before the
// separate write of the bucket count.
type skipHSetBK struct {
	mu   sync.Mutex
	key  string
	done bool
}

func (h *skipHSetBK) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *skipHSetBK) hit(cmd redis.Cmder) bool {
	args := cmd.Args()
	if cmd.Name() != "hset" || len(args) < 3 {
		return false
	}
	if k, _ := args[1].(string); k != h.key {
		return false
	}
	if f, _ := args[2].(string); f != "bk" {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return false
	}
	h.done = true
	return true
}

func (h *skipHSetBK) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.hit(cmd) {
			cmd.SetErr(errLostReply)
			return errLostReply
		}
		return next(ctx, cmd)
	}
}

func (h *skipHSetBK) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if h.hit(c) {
				for _, c := range cmds {
					c.SetErr(errLostReply)
				}
				return errLostReply
			}
		}
		return next(ctx, cmds)
	}
}

// A Rebuild of a bucketed SKU whose first state was lost writes the first
// state (a script) and its bucket count (a separate HSET) in two steps. A
// stop between them leaves a first state without bk, which every Store
// then reads as a SKU of one bucket, for good (the state exists: no
// reconciler rebuilds it again): the surviving buckets' units are out of
// Available and an order is refused as sold out while they sell nothing.
func TestReviewBucketRebuildStopsBeforeCount(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("hot", 90, 0, time.Minute, n) // 30 per bucket
		for _, suffix := range []string{":state", ":holds", ":users", ":xo", ":rb"} {
			if err := fx.c.Del(ctx, fx.bucketKey("hot", suffix)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		h := &skipHSetBK{key: fx.bucketKey("hot", ":state")}
		fx.c.AddHook(h)
		_, err := fx.s.Rebuild(ctx, []redisstock.Rebuild{{Listing: stock.Listing{SKU: "hot", Units: 90, HoldTTL: time.Minute}}})
		if err == nil {
			t.Fatalf("Rebuild succeeded although its count write failed")
		}
		// The reconciler's next pass: the SKU exists again, so it has
		// nothing to rebuild; a Store started after reads its count.
		later := newStore(t, fx.c, fx.cfg)
		st, err := later.Inspect(ctx, []string{"hot"})
		if err != nil || !st[0].Exists {
			t.Fatalf("Inspect after the Rebuild = %+v, %v", st, err)
		}
		if st[0].Available != 60 {
			t.Errorf("Inspect: available %d, want 60 (the two surviving buckets)", st[0].Available)
		}
		u := usersIn(n, 1, 1, "u")[0]
		err = later.Deduct(ctx, ord("o1", u, it("hot", 5)))
		if errors.Is(err, stock.ErrSoldOut) {
			t.Errorf("Deduct of 5: %v, with buckets %v", err, fx.bucketAvail("hot", n))
		}
	})
}

// loseFirst deletes the keys of the first bucket of sku (its master lost
// its data).
func (fx *fixture) loseFirst(sku string) {
	fx.t.Helper()
	for _, suffix := range []string{":state", ":holds", ":users", ":xo", ":rb", ":bl"} {
		if err := fx.c.Del(fx.ctx(), fx.bucketKey(sku, suffix)).Err(); err != nil {
			fx.t.Fatal(err)
		}
	}
}

// loseSlot deletes every key of the hash tag {name} (its master lost its
// data).
func (fx *fixture) loseSlot(name string) {
	fx.t.Helper()
	pattern := fx.cfg.Prefix + ":{" + name + "}*"
	var keys []string
	var mu sync.Mutex
	cc, ok := fx.c.(*redis.ClusterClient)
	if !ok {
		fx.t.Fatal("not a cluster client")
	}
	err := cc.ForEachMaster(fx.ctx(), func(ctx context.Context, m *redis.Client) error {
		ks, err := m.Keys(ctx, pattern).Result()
		mu.Lock()
		keys = append(keys, ks...)
		mu.Unlock()
		return err
	})
	if err != nil {
		fx.t.Fatal(err)
	}
	for _, k := range keys {
		if err := fx.c.Del(fx.ctx(), k).Err(); err != nil {
			fx.t.Fatal(err)
		}
	}
}

// A refill stopped after taking 10 units out of bucket 1 for the first
// bucket, whose state is then lost. PutOnSale of 90 units in the same 3
// buckets does not take the lease nor settle the departure record when
// the first state is missing, so the 10 units on their way come on top of
// the units PutOnSale set: the gate counts 100 of a listing of 90.
func TestReviewBucketPutOnSaleAfterLossKeepsUnitsOnTheWay(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("hot", 90, 0, time.Minute, n)
		if got, err := fx.s.BucketOut(ctx, "hot", n, 1, 0, "dead.0.1", 10); err != nil || got != 10 {
			t.Fatalf("BucketOut = %d, %v", got, err)
		}
		fx.loseFirst("hot")
		fx.bucketSale("hot", 90, 0, time.Minute, n)
		if av, err := fx.s.Available(ctx, "hot"); err != nil || av != 90 {
			t.Errorf("Available after PutOnSale of 90 = %d, %v; want 90", av, err)
		}
		// A sale of everything: the refills settle the stale transfer.
		var users []string
		for i := range n {
			users = append(users, usersIn(n, i, 3, "s"+string(rune('a'+i)))...)
		}
		sold := fx.sellOut("hot", n, users)
		if sold.taken > 90 {
			t.Errorf("sold %d units of a listing of 90", sold.taken)
		}
	})
}

// PutOnSale with Buckets 0 keeps a SKU's count, also with the first
// bucket's state lost (the counts hash kept): the listing's units are
// split over the buckets again, and the users counted in the other
// buckets stay checked.
func TestReviewBucketPutOnSaleZeroAfterLossKeepsCount(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("hot", 90, 1, time.Minute, n)
		u := usersIn(n, 1, 1, "u")[0]
		is(t, fx.s.Deduct(ctx, ord("o1", u, it("hot", 1))), nil, "Deduct of the user's 1")
		fx.loseFirst("hot")
		is(t, fx.s.PutOnSale(ctx, stock.Listing{SKU: "hot", Units: 30, PerUserLimit: 1, HoldTTL: time.Minute}), nil, "PutOnSale with Buckets 0")
		later := newStore(t, fx.c, fx.cfg)
		if av, err := later.Available(ctx, "hot"); err != nil || av != 30 {
			t.Errorf("Available = %d, %v; want 30 (the listing's, over the 3 buckets)", av, err)
		}
		if av := fx.bucketAvail("hot", n); av[0] != 10 || av[1] != 10 || av[2] != 10 {
			t.Errorf("bucket avail = %v, want [10 10 10]", av)
		}
		if err := later.Deduct(ctx, ord("o2", u, it("hot", 1))); err == nil {
			t.Errorf("user %s with a limit of 1 took a second unit after the PutOnSale", u)
		}
	})
}

// A Relist's settings reach the other buckets in a second step. When that
// step fails, Relist returns an error, but what a caller reads again
// (Inspect: the first bucket's settings) already shows the new limit, so
// nothing tells it to relist: users of the other buckets keep the old one.
func TestReviewBucketRelistSettingsHalfway(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("hot", 90, 5, time.Minute, n)
		st, err := fx.s.Inspect(ctx, []string{"hot"})
		if err != nil {
			t.Fatal(err)
		}
		fx.hook.arm(1, 1, true) // the relist script runs; the settings of the others never go
		_, rerr := fx.s.Relist(ctx, []redisstock.Relist{{SKU: "hot", Fence: st[0].Fence, PerUserLimit: 1, HoldTTL: time.Minute}})
		fx.hook.arm(0, 0, false)
		st, err = fx.s.Inspect(ctx, []string{"hot"})
		if err != nil {
			t.Fatal(err)
		}
		u := usersIn(n, 1, 1, "u")[0]
		derr := fx.s.Deduct(ctx, ord("o1", u, it("hot", 3)))
		if st[0].PerUserLimit == 1 && derr == nil {
			t.Errorf("Relist: %v; Inspect then shows limit 1, yet user %s of bucket 1 took 3 units", rerr, u)
		}
	})
}

// A refill stopped after its units arrived at the first bucket and before
// its departure record was cleared; the first bucket sells everything it
// has (the record counts those 40 units held), then its master loses its
// data, arrival marker included. Rebuild gives the first state no units
// (other buckets survived), but the departure record, with no marker left,
// counts and then delivers the 10 units again: the gate offers 60 units,
// the record has 50.
func TestReviewBucketRebuildRedeliversArrivedUnits(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("hot", 90, 0, time.Minute, n)
		if got, err := fx.s.BucketOutIn(ctx, "hot", n, 1, 0, "dead.0.1", 10); err != nil || got != 10 {
			t.Fatalf("BucketOutIn = %d, %v", got, err)
		}
		h := usersIn(n, 0, 1, "h")[0]
		is(t, fx.s.Deduct(ctx, ord("h1", h, it("hot", 40))), nil, "Deduct of the first bucket's 40")
		const record = 90 - 40 // the record has the 40 held
		fx.loseSlot("hot")     // state, holds, records, arrival markers: the whole slot
		later := newStore(t, fx.c, fx.cfg)
		if _, err := later.Rebuild(ctx, []redisstock.Rebuild{{Listing: stock.Listing{SKU: "hot", Units: record, HoldTTL: time.Minute}}}); err != nil {
			t.Fatal(err)
		}
		if av, err := later.Available(ctx, "hot"); err != nil || av > record {
			t.Errorf("Available after Rebuild = %d, %v; the record has %d", av, err, record)
		}
		var users []string
		for i := range n {
			users = append(users, usersIn(n, i, 2, "s"+string(rune('a'+i)))...)
		}
		fx.s = later
		if sold := fx.sellOut("hot", n, users); sold.taken > record {
			t.Errorf("the gate sold %d units after the Rebuild; the record had %d", sold.taken, record)
		}
	})
}

// A negative Adjust larger than the first bucket gathers units there and
// answers not applied (the fence moved); a stale fence is refused; the
// retry with the fence read again applies, every unit counted once; one
// larger than all the buckets together is out of range.
func TestReviewBucketNegativeAdjustFenced(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("hot", 90, 0, time.Minute, n)
		st, err := fx.s.Inspect(ctx, []string{"hot"})
		if err != nil {
			t.Fatal(err)
		}
		ok, err := fx.s.Adjust(ctx, "hot", st[0].Fence, -50)
		if ok || err != nil {
			t.Fatalf("Adjust -50 with 30 in the first bucket = %v, %v; want not applied", ok, err)
		}
		if ok, err := fx.s.Adjust(ctx, "hot", st[0].Fence, -50); ok || err != nil {
			t.Fatalf("Adjust with the fence read before the gathering = %v, %v; want refused", ok, err)
		}
		fx.want("hot", 90, 0, 0)
		st, err = fx.s.Inspect(ctx, []string{"hot"})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := fx.s.Adjust(ctx, "hot", st[0].Fence, -50); !ok || err != nil {
			t.Fatalf("Adjust -50 with the new fence = %v, %v", ok, err)
		}
		fx.want("hot", 40, 0, 0)
		st, _ = fx.s.Inspect(ctx, []string{"hot"})
		_, err = fx.s.Adjust(ctx, "hot", st[0].Fence, -41)
		is(t, err, stock.ErrInvalid, "Adjust -41 of 40")
		noBucketName(t, err, "hot", n, "Adjust")
		fx.want("hot", 40, 0, 0)
	})
}
