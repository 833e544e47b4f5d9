package redisstock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A hold whose line record is gone (deleted by hand, a partial flush) is
// listed in Snapshot's Lost, as Snapshot documents, wherever the gate keeps
// the hold (the holds zset, or the hold queue of a one-server Deduct).
func TestReviewQueueHoldWithoutItsRecordIsLost(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("x", "u1", it("a", 2))), nil, "Deduct")
		is(t, fx.s.Deduct(fx.ctx(), ord("y", "u2", it("a", 1))), nil, "Deduct")
		fx.delRecord("a", "x")
		sn, err := fx.s.Snapshot(fx.ctx(), []redisstock.SnapshotRequest{{SKU: "a"}})
		if err != nil || len(sn) != 1 {
			t.Fatalf("Snapshot = %+v, %v", sn, err)
		}
		if !slices.Equal(sn[0].Lost, []string{"x"}) || len(sn[0].Holds) != 1 || sn[0].Holds[0].OrderID != "y" {
			t.Fatalf("Snapshot: Holds %+v, Lost %q; want y held and x lost (held %d)", sn[0].Holds, sn[0].Lost, sn[0].Held)
		}
	})
}

// Calls that only read do not wait for replicas (see "Replication wait" in
// the package doc: HeldOrders, the reclaimer's peeks): on a master whose
// replicas never acknowledge, they answer as without WaitReplicas.
func TestReviewQueueReadsDoNotWaitForReplicas(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, waitClient(t, startMaster(t).Addr()), redisstock.Config{WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
	// Applied, its wait unacknowledged.
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Hour}); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("PutOnSale on a master without replicas: %v, want ErrUnknownOutcome", err)
	}
	if held, err := s.HeldOrders(ctx, "a"); err != nil || len(held) != 0 {
		t.Fatalf("HeldOrders = %+v, %v; want none, no error", held, err)
	}
	if got, err := s.ReclaimExpired(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("ReclaimExpired with nothing to return = %+v, %v; want none, no error", got, err)
	}
}

// A reclaim pass costs its peeks plus work in proportion to what it fixes
// (DESIGN.md, bounded cost; "Reclaim" in the package doc): with holds on
// many SKUs and none of them due, nothing ended and nothing to delete, it
// writes nothing (no script that records a reply per SKU, nothing for
// Config.WaitReplicas to wait for).
func TestReviewQueuePassWithNothingDueWritesNothing(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		const skus = 20
		for i := range skus {
			sku := fmt.Sprintf("s%02d", i)
			fx.sale(sku, 10, 0, time.Hour)
			is(t, fx.s.Deduct(fx.ctx(), ord("o"+sku, "u1", it(sku, 1))), nil, "Deduct")
		}
		fx.clock.Advance(time.Minute)
		before := prefixKeys(t, fx)
		if got := fx.reclaim(); len(got) != 0 {
			t.Fatalf("reclaimed %+v before any deadline", got)
		}
		after := prefixKeys(t, fx)
		if len(after) != len(before) {
			t.Fatalf("a pass with nothing due over %d SKUs with a hold each: %d keys under the prefix, %d before it",
				skus, len(after), len(before))
		}
	})
}

// prefixKeys lists the keys under the fixture's prefix, on every master.
func prefixKeys(t *testing.T, fx *fixture) []string {
	t.Helper()
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		ks, err := c.Keys(ctx, fx.cfg.Prefix+":*").Result()
		mu.Lock()
		keys = append(keys, ks...)
		mu.Unlock()
		return err
	}
	var err error
	switch c := fx.c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(fx.ctx(), scan)
	case *redis.Client:
		err = scan(fx.ctx(), c)
	default:
		t.Fatalf("cannot list the keys through a %T", c)
	}
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// A pass reports fewer than limit holds only when no more are due
// (ReclaimExpired): with more due holds on one SKU than one peek of its
// hold queue reads, a pass whose limit covers them all returns them all.
func TestReviewQueuePassReturnsEveryDueHoldWithinItsLimit(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		const n = 1500
		fx.sale("a", n, 0, time.Minute)
		for i := range n {
			id := fmt.Sprintf("o%04d", i)
			is(t, fx.s.Deduct(fx.ctx(), ord(id, "", it("a", 1))), nil, "Deduct")
		}
		fx.clock.Advance(time.Minute)
		got, err := fx.s.ReclaimExpired(fx.ctx(), 2*n)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			lv, _ := fx.s.Levels(fx.ctx(), "a")
			t.Fatalf("a pass with limit %d returned %d of %d due holds (levels after it %+v)", 2*n, len(got), n, lv)
		}
		fx.want("a", n, 0, 0)
	})
}

// listReads counts the list entries LRANGE replies carried.
type listReads struct{ n atomic.Int64 }

func (h *listReads) add(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if l, ok := c.(*redis.StringSliceCmd); ok && strings.EqualFold(c.Name(), "lrange") {
			h.n.Add(int64(len(l.Val())))
		}
	}
}

func (h *listReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *listReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.add(cmd)
		return err
	}
}

func (h *listReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.add(cmds...)
		return err
	}
}

// A reclaim pass peeks each SKU cheaply and otherwise works in proportion
// to what it fixes (DESIGN.md, bounded cost; "Reclaim" in the package doc:
// the hold queue's head): with a thousand live holds on a SKU and none due,
// a pass reads a few entries of the SKU's hold queue, not the queue.
func TestReviewQueuePassWithNothingDueReadsTheQueueHeadOnly(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		const n = 1000
		fx.sale("a", n, 0, time.Hour)
		for i := range n {
			is(t, fx.s.Deduct(fx.ctx(), ord(fmt.Sprintf("o%04d", i), "", it("a", 1))), nil, "Deduct")
		}
		fx.clock.Advance(time.Minute)
		h := &listReads{}
		fx.c.AddHook(h)
		if got, err := fx.s.ReclaimExpired(fx.ctx(), n); err != nil || len(got) != 0 {
			t.Fatalf("ReclaimExpired before any deadline = %+v, %v", got, err)
		}
		if read := h.n.Load(); read > 64 {
			t.Fatalf("a pass with nothing due read %d hold queue entries of one SKU", read)
		}
	})
}

// An ended hold's hold queue entry can outlive its record (Retention
// shorter than the hold time, the entry behind a live hold): Snapshot does
// not list it as Lost.
func TestReviewQueueEndedHoldPastRetentionIsNotLost(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		endBehindLiveHold(t, fx, time.Hour, "paid", 2*redisstock.MinRetention)
		sn, err := fx.s.Snapshot(fx.ctx(), []redisstock.SnapshotRequest{{SKU: "a"}})
		if err != nil || len(sn) != 1 || len(sn[0].Lost) != 0 || len(sn[0].Holds) != 1 || sn[0].Holds[0].OrderID != "live" {
			t.Fatalf("Snapshot = %+v, %v; want live held, nothing lost", sn, err)
		}
	})
}

// Orders with their own hold times (shorter and longer than the SKU's),
// hold time changes between them, extensions, confirmations, reverts and
// partial reverts, the clock moving on: after every pass no hold past its
// deadline is left, every live hold is listed once by HeldOrders and
// Snapshot with its record's deadline, and the counts agree with them.
func TestReviewQueueMixedHoldTimesNeverLeaveADueHold(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		const n = 400
		r := rand.New(rand.NewPCG(7, 11))
		fx.saleMax("a", 10*n, 0, 30*time.Second, 10*time.Minute)
		sold := int64(0)
		for i := range n {
			if r.IntN(40) == 0 {
				// Another hold time for the orders after it.
				fx.saleMax("a", 10*n, 0, time.Duration(1+r.IntN(60))*time.Second, 10*time.Minute)
			}
			id := fmt.Sprintf("o%04d", i)
			o := ord(id, "", it("a", 2))
			if r.IntN(3) == 0 {
				o.HoldTTL = time.Duration(1+r.IntN(120)) * time.Second
			}
			is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct "+id)
			switch r.IntN(6) {
			case 0:
				is(t, fx.s.Confirm(fx.ctx(), id), nil, "Confirm")
				sold += 2
			case 1:
				is(t, fx.s.Revert(fx.ctx(), id), nil, "Revert")
			case 2:
				_ = fx.s.ExtendHold(fx.ctx(), id, fx.clock.Now().Add(time.Duration(1+r.IntN(300))*time.Second))
			case 3:
				is(t, fx.s.RevertItems(fx.ctx(), rt("r"+id, id, it("a", 1))), nil, "RevertItems")
			}
			fx.clock.Advance(time.Duration(r.IntN(800)) * time.Millisecond)
			if r.IntN(10) == 0 {
				for len(fx.reclaim()) > 0 {
				}
				checkHolds(t, fx, "a")
			}
		}
		for range 20 {
			fx.clock.Advance(30 * time.Second)
			for len(fx.reclaim()) > 0 {
			}
			checkHolds(t, fx, "a")
		}
		lv, err := fx.s.Levels(fx.ctx(), "a")
		if err != nil || lv.Held != 0 || lv.Sold != sold {
			t.Fatalf("at the end: %+v, %v; want nothing held, %d sold", lv, err, sold)
		}
	})
}

// checkHolds checks that no live hold of sku is due, that HeldOrders and
// Snapshot list the same holds once each, with the deadlines of their
// records, and that their quantities add up to the SKU's held count.
func checkHolds(t *testing.T, fx *fixture, sku string) {
	t.Helper()
	held, err := fx.s.HeldOrders(fx.ctx(), sku)
	if err != nil {
		t.Fatal(err)
	}
	sn, err := fx.s.Snapshot(fx.ctx(), []redisstock.SnapshotRequest{{SKU: sku}})
	if err != nil {
		t.Fatal(err)
	}
	if !sameHolds(held, sn[0].Holds) {
		t.Fatalf("HeldOrders %+v, Snapshot %+v", held, sn[0].Holds)
	}
	seen := map[string]bool{}
	var sum int64
	now := fx.clock.Now()
	for _, h := range held {
		if seen[h.OrderID] {
			t.Fatalf("hold of %s listed twice: %+v", h.OrderID, held)
		}
		seen[h.OrderID] = true
		if !h.Deadline.After(now) {
			t.Fatalf("hold of %s due at %v still held at %v after the passes", h.OrderID, h.Deadline, now)
		}
		fx.wantDeadline(sku, h.OrderID, h.Deadline)
		sum += h.Qty
	}
	if sum != sn[0].Held {
		t.Fatalf("holds add up to %d, held %d", sum, sn[0].Held)
	}
}

// A state lost alone keeps its holds: Rebuild counts the units of every
// live hold once (queued, moved into the zset by ExtendHold, partially
// reverted), not those of ended ones, and the holds then end as usual.
func TestReviewQueueRebuildCountsQueuedHoldsOnce(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.saleMax("a", 20, 0, time.Minute, 10*time.Minute)
		for _, o := range []stock.Order{ord("x", "", it("a", 2)), ord("y", "", it("a", 3)), ord("z", "", it("a", 4)), ord("w", "", it("a", 5))} {
			is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct "+o.ID)
		}
		is(t, fx.s.ExtendHold(fx.ctx(), "y", fx.clock.Now().Add(5*time.Minute)), nil, "ExtendHold")
		is(t, fx.s.Confirm(fx.ctx(), "z"), nil, "Confirm")
		is(t, fx.s.RevertItems(fx.ctx(), rt("r1", "w", it("a", 2))), nil, "RevertItems")
		if err := fx.c.Del(fx.ctx(), fx.cfg.Prefix+":{a}:state").Err(); err != nil {
			t.Fatal(err)
		}
		got, err := fx.s.Rebuild(fx.ctx(), []redisstock.Rebuild{{Listing: stock.Listing{SKU: "a", Units: 8, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}}})
		if err != nil || len(got) != 1 || got[0] != redisstock.Applied {
			t.Fatalf("Rebuild = %v, %v", got, err)
		}
		fx.want("a", 8, 2+3+3, 0)
		fx.clock.Advance(time.Minute)
		wantReclaimed(t, fx.reclaim(), "x", "w")
		fx.want("a", 8+2+3, 3, 0)
		fx.clock.Advance(4 * time.Minute)
		wantReclaimed(t, fx.reclaim(), "y")
		fx.want("a", 16, 0, 0)
	})
}

// Audit at rest: once every order ended and Retention passed, with reclaim
// passes after it, nothing per order is stored, the hold queues' entries
// of ended holds included, even before the holds' deadlines.
func TestReviewQueueAtRestStoresNothing(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: redisstock.MinRetention})
		fx.sale("a", 1000, 0, time.Hour)
		for i := range 300 {
			id := fmt.Sprintf("o%03d", i)
			is(t, fx.s.Deduct(fx.ctx(), ord(id, "", it("a", 1))), nil, "Deduct")
			if i%2 == 0 {
				is(t, fx.s.Confirm(fx.ctx(), id), nil, "Confirm")
			} else {
				is(t, fx.s.Revert(fx.ctx(), id), nil, "Revert")
			}
		}
		for range 3 {
			elapse(fx, time.Minute)
			fx.reclaim()
		}
		fx.audit(0)
	})
}

// Two Stores on one prefix whose clocks disagree: the holds of the one
// ahead, placed first, do not keep the other's shorter holds from being
// returned at their deadlines, by either Store's reclaimer.
func TestReviewQueueStoresWithSkewedClocks(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		ahead := stocktest.NewClock(fx.clock.Now().Add(time.Hour))
		other := newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: ahead})
		fx.sale("a", 10, 0, time.Minute)
		is(t, other.Deduct(fx.ctx(), ord("far", "", it("a", 1))), nil, "Deduct on the Store ahead")
		is(t, fx.s.Deduct(fx.ctx(), ord("near", "", it("a", 2))), nil, "Deduct")
		is(t, other.Deduct(fx.ctx(), ord("far2", "", it("a", 3))), nil, "Deduct on the Store ahead")
		fx.clock.Advance(time.Minute)
		ahead.Advance(time.Minute)
		wantReclaimed(t, fx.reclaim(), "near")
		fx.want("a", 6, 4, 0)
		fx.clock.Advance(time.Hour)
		wantReclaimed(t, fx.reclaim(), "far", "far2")
		fx.want("a", 10, 0, 0)
	})
}

// endBehindLiveHold puts a on sale (10 units, hold time hold) on a Store of
// Retention MinRetention, holds a unit for order "live" (user u1) and one
// for order id (u2), confirms id, lets wait pass and runs two reclaim
// passes, which return nothing: id's record is gone while its hold queue
// entry still waits behind live's hold.
func endBehindLiveHold(t *testing.T, fx *fixture, hold time.Duration, id string, wait time.Duration) {
	t.Helper()
	fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: redisstock.MinRetention})
	fx.sale("a", 10, 0, hold)
	is(t, fx.s.Deduct(fx.ctx(), ord("live", "u1", it("a", 1))), nil, "Deduct")
	is(t, fx.s.Deduct(fx.ctx(), ord(id, "u2", it("a", 1))), nil, "Deduct")
	is(t, fx.s.Confirm(fx.ctx(), id), nil, "Confirm")
	elapse(fx, wait)
	wantReclaimed(t, fx.reclaim())
	wantReclaimed(t, fx.reclaim())
	if fx.hasRecord("a", id) {
		t.Fatalf("%s's ended record outlived Retention and two reclaim passes", id)
	}
}
