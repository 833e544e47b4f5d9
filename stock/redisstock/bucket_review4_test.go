package redisstock_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// r4Fail fails, without sending it, the first single command that calls
// the script whose SHA1 is hash, with err (after arm).
type r4Fail struct {
	hash string
	err  error
	left int
}

func (h *r4Fail) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *r4Fail) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.left > 0 {
			for _, a := range cmd.Args() {
				if s, _ := a.(string); s == h.hash {
					h.left--
					cmd.SetErr(h.err)
					return h.err
				}
			}
		}
		return next(ctx, cmd)
	}
}

func (h *r4Fail) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// r4HasArg matches a command batch one of whose commands has arg.
func r4HasArg(arg string) func([]redis.Cmder) bool {
	return func(cmds []redis.Cmder) bool {
		for _, c := range cmds {
			for _, a := range c.Args() {
				if s, _ := a.(string); s == arg {
					return true
				}
			}
		}
		return false
	}
}

// Promise broken: "Sold out is exact: a line is refused with
// stock.ErrSoldOut only when a refill found the other buckets unable to
// cover it" (doc.go, # Buckets); a business error is an answer, not a
// failure of the infrastructure.
//
// cleanRefusal (3f4df28) counts every joined error as "not clean" and
// deductBuckets then returns it at once, without the refill. But a plain
// refusal is also joined when only the unbind that frees the order ID
// fails after it (deductSlots.unbind: errors.Join(cause, free order ID
// error)), and that failure can be certain (a pool timeout, a dial
// failure, a server error reply: nothing applied, so not an unknown
// outcome). Sequence: 30 units in 3 buckets (10 each); V empties bucket
// 0; U (bucket 0) orders 1: bucket 0 refuses, the release of the order ID
// fails with redis.ErrPoolTimeout. Deduct answers ErrSoldOut (no unknown
// outcome, so a certain sold out) while the other buckets hold 20 units;
// before 3f4df28 the refill ran and the order was taken.
func TestReview4CertainUnbindFailureFalseSoldOut(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("hx", 30, 0, time.Minute, n)
		us := usersIn(n, 0, 2, "u")
		u, v := us[0], us[1]
		is(t, fx.s.Deduct(ctx, ord("v-0", v, it("hx", 10))), nil, "Deduct emptying bucket 0")
		h := &r4Fail{hash: redis.NewScript(lua.Script("stock_dir_release.lua")).Hash(), err: redis.ErrPoolTimeout, left: 1}
		fx.loadScripts()
		fx.c.AddHook(h)
		err := fx.s.Deduct(ctx, ord("u-0", u, it("hx", 1)))
		if h.left != 0 {
			t.Fatalf("the order ID's release never ran (Deduct: %v)", err)
		}
		av, aerr := fx.s.Available(ctx, "hx")
		if aerr != nil {
			t.Fatal(aerr)
		}
		t.Logf("Deduct: %v; Available %d", err, av)
		if errors.Is(err, stock.ErrSoldOut) && !errors.Is(err, stock.ErrUnknownOutcome) && av >= 1 {
			t.Errorf("Deduct of 1 unit answered a certain sold out (%v) while the SKU's other buckets hold %d units", err, av)
		}
	})
}

// Promise broken: invariants 1 and 6 (no oversell; gate available <=
// record available) and doc.go # Buckets "every unit counts once,
// whatever step a refill stopped at"; a reconciler's correction computed
// from a Snapshot is safe to apply once no lease is held.
//
// 3f4df28 makes a bucket's departure records expire Retention/2 after its
// last transfer out. Nothing ties a live refill to that: its 'in' step
// runs from the transfers it holds in memory, whether or not their
// records are still there. With Retention = MinRetention (1s, accepted by
// New) the records live 500ms, less than the lease (2s). Sequence: 90
// units in 3 buckets (30 each); U (bucket 0) orders 40; the refill takes
// 10 out of another bucket (departure record written) and stalls for 3s
// before its 'in' step (a GC pause, a slow network): the record expires at
// 500ms, the lease at 2s. A reconciler's Snapshot now reads 80 (the 10 are
// in no bucket and no record), xv did not move, no lease is held: Adjust
// +10 (record 90) is applied. Then the refill's 'in' adds the 10: the gate
// counts 100 units of 90 put on sale. Without the expiry the Snapshot
// would count the 10 on their way and nothing would be corrected.
func TestReview4DepartureExpiresUnderLiveRefillOversell(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		cfg := fx.cfg
		cfg.Retention = redisstock.MinRetention
		fx.s = newStore(t, fx.c, cfg)
		ctx := fx.ctx()
		const n, record = 3, 90
		fx.bucketSale("hot", record, 0, time.Minute, n)
		u := usersIn(n, 0, 1, "u")[0]
		h := &r3bHook{}
		fx.loadScripts()
		fx.c.AddHook(checkHook(h.check))
		var (
			snap    redisstock.Snapshot
			snapErr error
			applied bool
			adjErr  error
		)
		h.arm(r4HasArg(redisstock.BucketInScriptHash()), func() {
			fx.ageKeys(3 * time.Second) // the refill stalls before its 'in'
			c := context.Background()
			sn, err := fx.s.Snapshot(c, []redisstock.SnapshotRequest{{SKU: "hot"}})
			if snapErr = err; err != nil {
				return
			}
			snap = sn[0]
			if d := record - snap.Available; d != 0 {
				applied, adjErr = fx.s.Adjust(c, "hot", snap.Fence, d)
			}
		})
		is(t, fx.s.Deduct(ctx, ord("u-0", u, it("hot", 40))), nil, "Deduct of 40")
		if h.armed.Load() {
			t.Fatal("the refill's 'in' step never ran")
		}
		if snapErr != nil {
			t.Fatalf("Snapshot during the stalled refill: %v", snapErr)
		}
		t.Logf("Snapshot during the stalled refill: available %d; Adjust applied %v, %v", snap.Available, applied, adjErr)
		lv, err := fx.s.Levels(ctx, "hot")
		if err != nil {
			t.Fatal(err)
		}
		if total := lv.Available + lv.Held + lv.Sold; total > record {
			t.Errorf("gate counts %d units (available %d, held %d, sold %d) of %d put on sale: the departure record expired under a live refill, a reconciler added its units back, then they arrived",
				total, lv.Available, lv.Held, lv.Sold, record)
		}
	})
}

// r4Every runs f before every command batch match accepts, not from
// inside f.
type r4Every struct {
	busy  atomic.Bool
	on    atomic.Bool
	match func([]redis.Cmder) bool
	f     func()
}

func (h *r4Every) check(cmds []redis.Cmder) {
	if h.on.Load() && h.match(cmds) && h.busy.CompareAndSwap(false, true) {
		h.f()
		h.busy.Store(false)
	}
}

// r4ReadsXV matches a batch that reads a state's transfer count.
func r4ReadsXV(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if a := c.Args(); len(a) == 3 && c.Name() == "hget" && a[2] == "xv" {
			return true
		}
	}
	return false
}

// Promise broken: invariant 4 for every other SKU (Snapshot is the
// reconciler's reading of a batch: package reconcile fails the batch, and
// RepairAll stops the pass, on its error), and Snapshot's own doc: "the
// snapshot of each SKU" of the request.
//
// snapshotSplit (2327405) answers stock.ErrContention for the whole
// Snapshot call when a split SKU's transfers keep coming over 8 readings:
// the unsplit SKU p of the same request, whose snapshot was already read
// exactly, gets no answer either. Sequence: hot, 90 units in 3 buckets,
// and p, 10 units; while the Snapshot of {hot, p} runs, real refills run
// (each a Deduct of one unit more than its bucket has, then its Revert),
// one landing inside every reading of hot's buckets. Snapshot fails for p.
func TestReview4SplitContentionFailsWholeSnapshot(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("hot", 90, 0, time.Minute, n)
		fx.sale("p", 10, 0, time.Minute)
		rival := newStore(t, fx.c, fx.cfg)
		k := 0
		h := &r4Every{match: r4ReadsXV, f: func() {
			home := k % n
			u := usersIn(n, home, 1, "r"+strconv.Itoa(k))[0]
			id := "r-" + strconv.Itoa(k)
			k++
			c := context.Background()
			q := fx.bucketAvail("hot", n)[home] + 1
			if err := rival.Deduct(c, ord(id, u, it("hot", q))); err != nil {
				t.Errorf("rival Deduct of %d: %v", q, err)
				return
			}
			if err := rival.Revert(c, id); err != nil {
				t.Errorf("rival Revert: %v", err)
			}
		}}
		fx.c.AddHook(checkHook(h.check))
		h.on.Store(true)
		sn, err := fx.s.Snapshot(ctx, []redisstock.SnapshotRequest{{SKU: "hot"}, {SKU: "p"}})
		h.on.Store(false)
		t.Logf("%d refills during the Snapshot", k)
		if err != nil {
			t.Fatalf("Snapshot of {hot, p} while hot's buckets refill: %v (p, not split, has no snapshot)", err)
		}
		if sn[1].Available != 10 {
			t.Errorf("p: available %d, want 10", sn[1].Available)
		}
	})
}

// Promise broken: doc.go # Buckets, "PutOnSale drops every transfer still
// on its way (it overwrites the counts), so a late arrival adds nothing on
// top"; invariant 1.
//
// PutOnSale finds the transfers on their way by their departure records
// and marks each 'void' at its destination, so the refill's late 'in'
// adds nothing. Since 3f4df28 a record expires Retention/2 after its
// bucket's last transfer out, while the refill that wrote it may still be
// alive. Sequence (Retention = MinRetention, records live 500ms): 90 units
// in 3 buckets; U (bucket 0) orders 40; the refill takes 10 out of another
// bucket and stalls 3s before its 'in' (record and lease expire);
// PutOnSale of 90 (30 a bucket) finds no transfer to drop; the refill's
// 'in' adds its 10 on top (the state's gen is unchanged by PutOnSale), and
// U's order takes 40: the gate counts 100 units after a PutOnSale of 90.
// Passes on 2cb91bc (the record is found and voided).
func TestReview4DepartureExpiresUnderLiveRefillPutOnSale(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		cfg := fx.cfg
		cfg.Retention = redisstock.MinRetention
		fx.s = newStore(t, fx.c, cfg)
		ctx := fx.ctx()
		const n, units = 3, 90
		fx.bucketSale("hot", units, 0, time.Minute, n)
		u := usersIn(n, 0, 1, "u")[0]
		h := &r3bHook{}
		fx.loadScripts()
		fx.c.AddHook(checkHook(h.check))
		var putErr error
		h.arm(r4HasArg(redisstock.BucketInScriptHash()), func() {
			fx.ageKeys(3 * time.Second)
			putErr = fx.s.PutOnSale(context.Background(), stock.Listing{SKU: "hot", Units: units, HoldTTL: time.Minute, Buckets: n})
		})
		err := fx.s.Deduct(ctx, ord("u-0", u, it("hot", 40)))
		t.Logf("Deduct: %v; PutOnSale: %v", err, putErr)
		lv, err := fx.s.Levels(ctx, "hot")
		if err != nil {
			t.Fatal(err)
		}
		if total := lv.Available + lv.Held + lv.Sold; total > units {
			t.Errorf("gate counts %d units (available %d, held %d) after PutOnSale of %d", total, lv.Available, lv.Held, units)
		}
	})
}
