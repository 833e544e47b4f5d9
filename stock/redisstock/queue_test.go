package redisstock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// The holds a one-server Deduct places go into their SKU's hold queue, in
// arrival order, when their deadline is not before the queue's last; a
// hold with an earlier deadline (an order's own, shorter HoldTTL) is still
// returned at its deadline, not after the longer holds placed before it.
func TestShorterHoldAfterLongerOnesIsReclaimedAtItsDeadline(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, 10*time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("long", "u1", it("a", 1))), nil, "Deduct with the SKU's hold time")
		short := ord("short", "u2", it("a", 2))
		short.HoldTTL = time.Minute
		is(t, fx.s.Deduct(fx.ctx(), short), nil, "Deduct with a shorter hold time")
		fx.clock.Advance(time.Minute - time.Millisecond)
		if got := fx.reclaim(); len(got) != 0 {
			t.Fatalf("before any deadline: reclaimed %+v", got)
		}
		fx.clock.Advance(time.Millisecond)
		wantReclaimed(t, fx.reclaim(), "short")
		fx.want("a", 9, 1, 0)
		fx.clock.Advance(9 * time.Minute)
		wantReclaimed(t, fx.reclaim(), "long")
		fx.want("a", 10, 0, 0)
		wantReclaimed(t, fx.reclaim())
	})
}

// A hold whose deadline ExtendHold moved out is returned at its new
// deadline, once, and not at the one it was placed with.
func TestExtendedHoldIsReclaimedAtItsNewDeadline(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.saleMax("a", 10, 0, time.Minute, 10*time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("x", "u1", it("a", 1))), nil, "Deduct")
		is(t, fx.s.Deduct(fx.ctx(), ord("y", "u2", it("a", 1))), nil, "Deduct after it")
		t0 := fx.clock.Now()
		is(t, fx.s.ExtendHold(fx.ctx(), "x", t0.Add(5*time.Minute)), nil, "ExtendHold")
		fx.clock.Advance(2 * time.Minute)
		wantReclaimed(t, fx.reclaim(), "y")
		fx.want("a", 9, 1, 0)
		held, err := fx.s.HeldOrders(fx.ctx(), "a")
		if err != nil || len(held) != 1 || held[0].OrderID != "x" || !held[0].Deadline.Equal(t0.Add(5*time.Minute)) {
			t.Fatalf("HeldOrders = %+v, %v; want x until %v", held, err, t0.Add(5*time.Minute))
		}
		fx.clock.Advance(3*time.Minute - time.Millisecond)
		wantReclaimed(t, fx.reclaim())
		fx.clock.Advance(time.Millisecond)
		wantReclaimed(t, fx.reclaim(), "x")
		wantReclaimed(t, fx.reclaim())
		fx.want("a", 10, 0, 0)
	})
}

// Of 600 holds, a third confirmed and a third reverted, reclaimers racing
// after the deadline return each of the rest exactly once, and nothing
// that ended.
func TestRacingReclaimersReturnEachDueHoldOnce(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		const n = 600
		fx.sale("a", n, 0, time.Minute)
		var want []string
		for i := range n {
			id := fmt.Sprintf("o%03d", i)
			is(t, fx.s.Deduct(fx.ctx(), ord(id, "u"+id, it("a", 1))), nil, "Deduct")
			switch i % 3 {
			case 0:
				is(t, fx.s.Confirm(fx.ctx(), id), nil, "Confirm")
			case 1:
				is(t, fx.s.Revert(fx.ctx(), id), nil, "Revert")
			default:
				want = append(want, id)
			}
		}
		fx.clock.Advance(time.Minute)
		var mu sync.Mutex
		var got []stock.Reclaimed
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					r, err := fx.s.ReclaimExpired(fx.ctx(), 64)
					if err != nil {
						t.Error(err)
						return
					}
					if len(r) == 0 {
						return
					}
					mu.Lock()
					got = append(got, r...)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		wantReclaimed(t, got, want...)
		fx.want("a", n-n/3, 0, n/3)
		held, err := fx.s.HeldOrders(fx.ctx(), "a")
		if err != nil || len(held) != 0 {
			t.Fatalf("HeldOrders after the reclaimers = %+v, %v", held, err)
		}
	})
}

// HeldOrders and Snapshot list every live hold, wherever the gate keeps
// it, in deadline order.
func TestReadsListEveryHoldInDeadlineOrder(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, 10*time.Minute)
		t0 := fx.clock.Now()
		is(t, fx.s.Deduct(fx.ctx(), ord("late", "u1", it("a", 1))), nil, "Deduct")
		early := ord("early", "u2", it("a", 2))
		early.HoldTTL = time.Minute
		is(t, fx.s.Deduct(fx.ctx(), early), nil, "Deduct with a shorter hold time")
		is(t, fx.s.Deduct(fx.ctx(), ord("later", "u3", it("a", 3))), nil, "Deduct")
		want := []redisstock.Hold{
			{OrderID: "early", UserID: "u2", SKU: "a", Qty: 2, Deadline: t0.Add(time.Minute)},
			{OrderID: "late", UserID: "u1", SKU: "a", Qty: 1, Deadline: t0.Add(10 * time.Minute)},
			{OrderID: "later", UserID: "u3", SKU: "a", Qty: 3, Deadline: t0.Add(10 * time.Minute)},
		}
		held, err := fx.s.HeldOrders(fx.ctx(), "a")
		if err != nil || !sameHolds(held, want) {
			t.Fatalf("HeldOrders = %+v, %v; want %+v", held, err, want)
		}
		sn, err := fx.s.Snapshot(fx.ctx(), []redisstock.SnapshotRequest{{SKU: "a"}})
		if err != nil || len(sn) != 1 || !sameHolds(sn[0].Holds, want) || sn[0].Held != 6 {
			t.Fatalf("Snapshot = %+v, %v; want held 6 in %+v", sn, err, want)
		}
	})
}

// sameHolds compares holds in order, their deadlines as instants.
func sameHolds(got, want []redisstock.Hold) bool {
	return slices.EqualFunc(got, want, func(a, b redisstock.Hold) bool {
		return a.OrderID == b.OrderID && a.UserID == b.UserID && a.SKU == b.SKU && a.Qty == b.Qty && a.Deadline.Equal(b.Deadline)
	})
}

// A prefix a Store of key layout 2 wrote (no hold queue; its mark) is
// refused until Migrate replaces the mark; its holds survive.
func TestLayout2PrefixIsRefusedUntilMigrated(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("x", "u1", it("a", 1))), nil, "Deduct")
		reg := fx.cfg.Prefix + ":skus"
		members, err := fx.c.SMembers(fx.ctx(), reg).Result()
		if err != nil {
			t.Fatal(err)
		}
		var marks int
		for _, m := range members {
			if rest, ok := strings.CutPrefix(m, "{layout:3/"); ok {
				marks++
				fx.c.SRem(fx.ctx(), reg, m)
				fx.c.SAdd(fx.ctx(), reg, "{layout:2/"+rest)
			}
		}
		if marks != 1 {
			t.Fatalf("registry %q: want one mark of layout 3", members)
		}
		s := newStore(t, fx.c, fx.cfg)
		err = s.Deduct(fx.ctx(), ord("y", "u2", it("a", 1)))
		if !errors.Is(err, redisstock.ErrLayout) || !errors.Is(err, stock.ErrUnavailable) || !strings.Contains(err.Error(), "layout 2") {
			t.Fatalf("Deduct on a prefix of layout 2: %v, want ErrLayout naming layout 2", err)
		}
		if _, err := s.Migrate(fx.ctx()); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		is(t, s.Deduct(fx.ctx(), ord("y", "u2", it("a", 1))), nil, "Deduct after Migrate")
		is(t, s.Confirm(fx.ctx(), "x"), nil, "Confirm of the hold placed before")
		if n, err := fx.c.SIsMember(fx.ctx(), reg, strings.Replace(layoutMarkOf(t, fx), "{layout:3/", "{layout:2/", 1)).Result(); err != nil || n {
			t.Fatalf("the mark of layout 2 after Migrate: %v, %v", n, err)
		}
		fx.want("a", 8, 1, 1)
	})
}

// layoutMarkOf is the registry's layout mark.
func layoutMarkOf(t *testing.T, fx *fixture) string {
	t.Helper()
	members, err := fx.c.SMembers(fx.ctx(), fx.cfg.Prefix+":skus").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if strings.HasPrefix(m, "{layout:") {
			return m
		}
	}
	t.Fatalf("registry %q: no layout mark", members)
	return ""
}

// wantReclaimed checks that got returned exactly the orders ids, each
// once.
func wantReclaimed(t *testing.T, got []stock.Reclaimed, ids ...string) {
	t.Helper()
	var have []string
	for _, r := range got {
		have = append(have, r.OrderID)
	}
	slices.Sort(have)
	want := slices.Sorted(slices.Values(ids))
	if !slices.Equal(have, want) {
		t.Fatalf("reclaimed %q, want %q", have, want)
	}
}

// One pass returns every due hold up to its limit, however long the run
// of due holds placed one after another, with ended ones among them.
func TestOnePassReturnsEveryDueHoldUpToItsLimit(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		const n = 300
		fx.sale("a", n, 0, time.Minute)
		var want []string
		for i := range n {
			id := fmt.Sprintf("o%03d", i)
			is(t, fx.s.Deduct(fx.ctx(), ord(id, "u"+id, it("a", 1))), nil, "Deduct")
			if i >= 200 && i%5 == 0 {
				is(t, fx.s.Confirm(fx.ctx(), id), nil, "Confirm")
			} else {
				want = append(want, id)
			}
		}
		fx.clock.Advance(time.Minute)
		got, err := fx.s.ReclaimExpired(fx.ctx(), 150)
		if err != nil || len(got) != 150 {
			t.Fatalf("first pass, limit 150: %d reclaimed, %v", len(got), err)
		}
		rest, err := fx.s.ReclaimExpired(fx.ctx(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		wantReclaimed(t, append(got, rest...), want...)
		fx.want("a", n-20, 0, 20)
	})
}

// A reply of the hold queue's peek that is not the script's (too short)
// fails the pass with an error, never a panic.
func TestMalformedQueuePeekReplyIsAnError(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("x", "u1", it("a", 1))), nil, "Deduct")
		fx.c.AddHook(shortPeekHook{})
		if _, err := fx.s.ReclaimExpired(fx.ctx(), 10); err == nil {
			t.Fatal("ReclaimExpired with a peek reply of no elements: nil error")
		}
	})
}

// shortPeekHook replaces every reply of the hold queue's peek script with
// an empty list.
type shortPeekHook struct{}

func (shortPeekHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (shortPeekHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (shortPeekHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if cmd, ok := c.(*redis.Cmd); ok && queuePeek(c) && cmd.Err() == nil {
				cmd.SetVal([]any{})
			}
		}
		return err
	}
}
