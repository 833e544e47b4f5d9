package redisstock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A refused Cluster attempt that found no record of the order leaves the
// directory entry while another attempt of the same order (a retry on
// another node) has just succeeded: the live order's entry must keep no
// TTL, so its buyer can still confirm before the deadline.
//
// It runs on the miniredis ClusterClient alone: it moves the servers' time
// past the entry's lease, which a real Cluster cannot.
func TestClusterRefusedAttemptLeavesALiveOrdersEntryAlone(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		fx.c.AddHook(pauseHook{})
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Second})
		fx.sale("a", 1, 0, 2*time.Hour)
		o := ord("o1", "u1", it("a", 2))
		a := newPause(fx.s.DirKey("o1"))
		doneA := make(chan error, 1)
		go func() { doneA <- fx.s.Deduct(a.ctx(fx.ctx()), o) }()
		a.wait(t) // A was refused (sold out) and is about to leave the entry
		is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "more", SKU: "a", Units: 1}), nil, "Restock")
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "B, the retry")
		a.release()
		is(t, <-doneA, stock.ErrSoldOut, "A")
		fx.want("a", 0, 2, 0)
		// Well before the order's deadline (2h), past any lease.
		fx.mini.FastForward(stock.DefaultHoldTTL + time.Minute)
		fx.clock.Advance(stock.DefaultHoldTTL + time.Minute)
		fx.sale("b", 10, 0, time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("b", 1))), stock.ErrConflict, "the live ID with other items")
		fx.want("b", 10, 0, 0)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm of the live order")
		fx.want("a", 0, 0, 2)
	})
}

// A SKU whose state hash alone was lost (its holds and records kept) is
// rebuilt while an order still holds it: the rebuilt state counts that
// hold, so the hold's Confirm or Revert after the rebuild leaves the
// counts whole (held never goes negative, and a later live hold is seen
// by a fenced warm-up that refuses live holds).
func TestRebuildCountsTheHoldsTheGateStillHas(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))), nil, "Deduct o1")
		is(t, fx.s.Deduct(fx.ctx(), ord("o2", "u1", it("a", 3))), nil, "Deduct o2")
		if err := fx.c.Del(fx.ctx(), fx.cfg.Prefix+":{a}:state").Err(); err != nil {
			t.Fatal(err)
		}
		got, err := fx.s.Rebuild(fx.ctx(), []redisstock.Rebuild{{Listing: stock.Listing{SKU: "a", Units: 5, HoldTTL: time.Minute}}})
		if err != nil || len(got) != 1 || got[0] != redisstock.Applied {
			t.Fatalf("Rebuild = %v, %v; want applied", got, err)
		}
		fx.want("a", 5, 5, 0)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm o1")
		fx.want("a", 5, 3, 2)
		is(t, fx.s.Revert(fx.ctx(), "o2"), nil, "Revert o2")
		fx.want("a", 8, 0, 2)
		is(t, fx.s.Deduct(fx.ctx(), ord("o3", "u1", it("a", 1))), nil, "Deduct o3")
		fx.want("a", 7, 1, 2)
		st, err := fx.s.Inspect(fx.ctx(), []string{"a"})
		if err != nil {
			t.Fatal(err)
		}
		out, err := fx.s.Relist(fx.ctx(), []redisstock.Relist{{SKU: "a", Fence: st[0].Fence, HoldTTL: time.Minute}})
		if err != nil || len(out) != 1 || out[0] != redisstock.HasHolds {
			t.Fatalf("Relist over a live hold = %v, %v; want has-holds", out, err)
		}
	})
}

// resendOnce sends a command that carries a given script twice, as go-redis
// does when the first reply is lost (a read timeout): the caller sees the
// second run's reply only.
type resendOnce struct {
	mu   sync.Mutex
	sha  string
	left int
}

func (h *resendOnce) arm(script string) {
	sum := sha1.Sum([]byte(lua.Script(script)))
	h.mu.Lock()
	h.sha, h.left = hex.EncodeToString(sum[:]), 1
	h.mu.Unlock()
}

func (h *resendOnce) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *resendOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		armed := h.left > 0 && carries([]redis.Cmder{cmd}, h.sha)
		if armed {
			h.left--
		}
		h.mu.Unlock()
		err := next(ctx, cmd)
		if !armed || err != nil {
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *resendOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A correction whose reply was lost and that the client sent again: Adjust
// must not report it unapplied (a caller told "nothing changed" may apply
// it again under a new fence it did not recompute for).
func TestAdjustResentReportsApplied(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.loadScripts()
		h := &resendOnce{}
		fx.c.AddHook(h)
		fx.sale("a", 10, 0, time.Minute)
		st, err := fx.s.Inspect(fx.ctx(), []string{"a"})
		if err != nil {
			t.Fatal(err)
		}
		h.arm("stock_adjust.lua")
		applied, err := fx.s.Adjust(fx.ctx(), "a", st[0].Fence, 5)
		if err != nil || !applied {
			t.Fatalf("Adjust with a resent command = %v, %v; want applied", applied, err)
		}
		fx.want("a", 15, 0, 0)
		applied, err = fx.s.Adjust(fx.ctx(), "a", st[0].Fence, 5)
		if err != nil || applied {
			t.Fatalf("Adjust over a moved fence = %v, %v; want refused", applied, err)
		}
		fx.want("a", 15, 0, 0)
	})
}

// A rebuild whose reply was lost and that the client sent again: the
// resend finds the state its first run created and must report it created
// (Applied), not a state some other writer made (Exists).
func TestRebuildResentReportsApplied(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		h := &resendHook{}
		fx.c.AddHook(h)
		fx.sale("a", 10, 0, time.Minute)
		if err := fx.c.Del(fx.ctx(), fx.cfg.Prefix+":{a}:state").Err(); err != nil {
			t.Fatal(err)
		}
		h.arm("stock_rebuild.lua", 1)
		got, err := fx.s.Rebuild(fx.ctx(), []redisstock.Rebuild{{Listing: stock.Listing{SKU: "a", Units: 7, HoldTTL: time.Minute}}})
		if err != nil || len(got) != 1 || got[0] != redisstock.Applied {
			t.Fatalf("Rebuild with a resent pipeline = %v, %v; want applied", got, err)
		}
		fx.want("a", 7, 0, 0)
		got, err = fx.s.Rebuild(fx.ctx(), []redisstock.Rebuild{{Listing: stock.Listing{SKU: "a", Units: 9, HoldTTL: time.Minute}}})
		if err != nil || len(got) != 1 || got[0] != redisstock.Exists {
			t.Fatalf("a second Rebuild = %v, %v; want exists", got, err)
		}
		fx.want("a", 7, 0, 0)
	})
}

// refusedErr is a server's error reply (go-redis's redis.Error): the
// command ran and refused, certainly.
type refusedErr struct{}

func (refusedErr) Error() string { return "ERR refused by the test" }
func (refusedErr) RedisError()   {}

// refuseNth answers the nth single script call (not a pipeline) after arm
// with a server's error reply, without sending it.
type refuseNth struct {
	mu    sync.Mutex
	n     int
	pipes int // the same for pipelines that carry a script
}

func (h *refuseNth) arm(n int) { h.mu.Lock(); h.n = n; h.mu.Unlock() }

func (h *refuseNth) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *refuseNth) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.mu.Lock()
			hit := false
			if h.n > 0 {
				h.n--
				hit = h.n == 0
			}
			h.mu.Unlock()
			if hit {
				cmd.SetErr(refusedErr{})
				return refusedErr{}
			}
		}
		return next(ctx, cmd)
	}
}

func (h *refuseNth) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		scripted := false
		for _, c := range cmds {
			if name := c.Name(); name == "evalsha" || name == "eval" {
				scripted = true
			}
		}
		h.mu.Lock()
		hit := false
		if scripted && h.pipes > 0 {
			h.pipes--
			hit = h.pipes == 0
		}
		h.mu.Unlock()
		if hit {
			for _, c := range cmds {
				c.SetErr(refusedErr{})
			}
			return refusedErr{}
		}
		return next(ctx, cmds)
	}
}

// A multi-slot Confirm whose later group the server refuses after the
// first group was confirmed: a partial write, so ErrUnknownOutcome.
func TestClusterRefusedLaterConfirmGroupSaysUnknown(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		fx.loadScripts()
		h := &refuseNth{}
		fx.c.AddHook(h)
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct")
		h.mu.Lock()
		h.pipes = 2
		h.mu.Unlock()
		err := fx.s.Confirm(fx.ctx(), "o1")
		if lv, lerr := fx.s.Levels(fx.ctx(), lo); lerr == nil && lv.Sold == 1 && !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("Confirm with its later group refused: %v, with the first group confirmed; want ErrUnknownOutcome", err)
		}
	})
}

// A Cluster Deduct whose later slot group the server refuses (an error
// reply) after the first group was taken: the call either undoes the first
// group and fails plainly (nothing applied), or says ErrUnknownOutcome.
// Never a plain error with units held.
func TestClusterRefusedLaterGroupLeavesNothingOrSaysUnknown(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		fx.loadScripts()
		h := &refuseNth{}
		fx.c.AddHook(h)
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		h.arm(1)
		err := fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 1)))
		if err == nil {
			t.Fatal("Deduct with its later group refused: nil")
		}
		if !errors.Is(err, stock.ErrUnknownOutcome) {
			fx.want(lo, 10, 0, 0)
			fx.want(hi, 10, 0, 0)
			is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2))), nil, "the ID free for other items")
		}
	})
}

// eachMiniCluster runs f on the miniredis-backed ClusterClient, whose time
// a test can move.
func eachMiniCluster(t *testing.T, f func(t *testing.T, fx *fixture)) {
	for _, b := range backends() {
		if b.name == "miniredis-cluster" {
			t.Run(b.name, func(t *testing.T) { f(t, newFixture(t, b)) })
			return
		}
	}
	t.Fatal("no miniredis-cluster backend")
}
