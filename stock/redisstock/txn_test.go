package redisstock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// dropHook, while armed, drops the script calls that name key, one by
// one inside a pipeline too (as a Cluster node whose connection fails
// while the others answer): they are never sent, and fail as a lost reply.
type dropHook struct {
	mu  sync.Mutex
	key string
}

func (h *dropHook) arm(key string) { h.mu.Lock(); h.key = key; h.mu.Unlock() }

func (h *dropHook) drops(cmd redis.Cmder) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.key != "" && names(cmd, h.key)
}

func (h *dropHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *dropHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.drops(cmd) {
			cmd.SetErr(errLostReply)
			return errLostReply
		}
		return next(ctx, cmd)
	}
}

func (h *dropHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var sent []redis.Cmder
		for _, c := range cmds {
			if h.drops(c) {
				c.SetErr(errLostReply)
			} else {
				sent = append(sent, c)
			}
		}
		if len(sent) == 0 {
			return errLostReply
		}
		if err := next(ctx, sent); err != nil {
			return err
		}
		if len(sent) < len(cmds) {
			return errLostReply
		}
		return nil
	}
}

// entryKept reports whether the order's directory entry is still stored
// (ended or not: a field of its shard).
func (fx *fixture) entryKept(order string) bool {
	fx.t.Helper()
	ok, err := fx.c.HExists(fx.ctx(), fx.s.DirKey(order), order).Result()
	if err != nil {
		fx.t.Fatal(err)
	}
	return ok
}

// A multi-slot order whose Confirm reached one slot, retried later: every
// line of the order lives Retention from the order's end, so within it a
// repeat Deduct takes nothing and a repeat Confirm sells nothing twice,
// and a refund returns every line.
func TestClusterConfirmedOrderSellsOnce(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, 15*time.Minute)
		fx.sale(hi, 10, 0, 15*time.Minute)
		o := ord("o1", "u1", it(lo, 1), it(hi, 1))
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct")
		drop := &dropHook{}
		fx.c.AddHook(drop)
		drop.arm(fx.s.LinesKey(hi))
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm that reached one slot")
		drop.arm("")
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 1, 0)
		elapse(fx, 10*time.Minute)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "the retry")
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 0, 1)
		elapse(fx, 55*time.Minute) // within Retention of the order's end
		fx.reclaim()
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "repeat Deduct of the confirmed order")
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 0, 1)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "repeat Confirm")
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 0, 1)
		is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "refund within Retention")
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
	})
}

// An ended order whose entry has no attempt set (written by a Store on one
// server, then served by a Cluster Store): a refused repeat Deduct leaves
// the entry, so the order stays known and its ID bound within Retention.
func TestRefusedRepeatKeepsTheEndedEntry(t *testing.T) {
	m := miniredis.RunT(t)
	one := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { one.Close() })
	fx := newFixture(t, backend{name: "miniredis", client: func(*testing.T) (redis.UniversalClient, *miniredis.Miniredis) {
		return one, m
	}})
	fx.s = newStore(t, one, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
	fx.sale("a", 10, 0, time.Minute)
	fx.sale("b", 10, 0, time.Minute)
	o := ord("o1", "u1", it("a", 1))
	is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct on one server")
	is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "Revert on one server")

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{m.Addr()}})
	t.Cleanup(func() { cc.Close() })
	fx.c = cc
	fx.s = newStore(t, cc, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
	is(t, fx.s.Deduct(fx.ctx(), o), stock.ErrOrderClosed, "repeat Deduct of the reverted order")
	is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "repeat Revert")
	is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("b", 1))), stock.ErrConflict, "the reverted ID with other items")
	fx.want("a", 10, 0, 0)
	fx.want("b", 10, 0, 0)
}

// settledAway lets every deadline, attempt lease and Retention pass, with
// reclaim passes between: afterwards the order's entry must be gone.
func settledAway(t *testing.T, fx *fixture, order string) {
	t.Helper()
	for range 3 {
		elapse(fx, stock.DefaultHoldTTL+2*time.Hour)
		fx.reclaim()
	}
	if fx.entryKept(order) {
		_, ends, ok, _ := fx.s.Entry(fx.ctx(), order)
		t.Fatalf("%s: its directory entry is still stored (read %v, ends %d) after every lease and Retention passed", order, ok, ends)
	}
}

// A return of an order's last units whose caller stops before the entry's
// end: the entry still ends, and is deleted after Retention.
func TestLastReturnStoppedEndsTheEntry(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		fx.sale("a", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))), nil, "Deduct")
		fx.hook.arm(1, 1, true) // the return runs, what follows it is never sent
		err := fx.s.RevertItems(fx.ctx(), rt("r1", "o1", it("a", 2)))
		fx.hook.arm(0, 0, false)
		if err != nil {
			unknown(t, err, "RevertItems stopped after the return")
		}
		fx.want("a", 10, 0, 0)
		settledAway(t, fx, "o1")
		fx.want("a", 10, 0, 0)
	})
}

// Confirm and Revert on a Cluster whose call ending the entry fails: the
// entry still ends, and is deleted after Retention.
func TestClusterLostEntryEndStillEnds(t *testing.T) {
	for _, settle := range []string{"Confirm", "Revert"} {
		t.Run(settle, func(t *testing.T) {
			eachMiniCluster(t, func(t *testing.T, fx *fixture) {
				lo, hi, drop := lostEntryEnd(t, fx, time.Minute)
				err := settler(fx.s, settle)(fx.ctx(), "o1")
				drop.arm("")
				if err != nil {
					unknown(t, err, settle+" whose entry's end was lost")
				}
				settledAway(t, fx, "o1")
				if settle == "Confirm" {
					fx.want(lo, 9, 0, 1)
					fx.want(hi, 9, 0, 1)
				} else {
					fx.want(lo, 10, 0, 0)
					fx.want(hi, 10, 0, 0)
				}
			})
		})
	}
}

// A Deduct that bound its order ID and took nothing (its bind's reply
// lost, its context ended while the bind was in flight, its process dead
// before the take): the entry ends within the attempt lease, and the ID
// is free for another order after it.
func TestClusterAbandonedBindEnds(t *testing.T) {
	for _, batch := range []int{1, 0} {
		t.Run("MaxBatch "+map[int]string{1: "1", 0: "default"}[batch], func(t *testing.T) {
			eachMiniCluster(t, func(t *testing.T, fx *fixture) {
				fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour, MaxBatch: batch})
				lo, hi := skusInSlotOrder(t, fx)
				fx.sale(lo, 10, 0, time.Minute)
				fx.sale(hi, 10, 0, time.Minute)
				for _, o := range []stock.Order{ord("o1", "u1", it(lo, 1)), ord("o2", "u1", it(lo, 1), it(hi, 1))} {
					fx.hook.arm(0, 1, true) // the bind is sent (HSETNX), the first script never is
					err := fx.s.Deduct(fx.ctx(), o)
					fx.hook.arm(0, 0, false)
					if err == nil {
						t.Fatalf("Deduct %s whose take was never sent: nil", o.ID)
					}
					if !fx.entryKept(o.ID) {
						t.Fatalf("Deduct %s: no entry was bound", o.ID)
					}
				}
				fx.want(lo, 10, 0, 0)
				fx.want(hi, 10, 0, 0)
				settledAway(t, fx, "o1")
				settledAway(t, fx, "o2")
				is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u2", it(hi, 2))), nil, "the ID reused for other items")
				fx.want(hi, 8, 2, 0)
			})
		})
	}
}

// audit checks the Store at rest: no orphan, and want per-order items
// stored (-1: any number).
func (fx *fixture) audit(want int) {
	fx.t.Helper()
	orphans, stored, err := fx.s.Audit(fx.ctx())
	if err != nil {
		fx.t.Fatalf("Audit: %v", err)
	}
	if len(orphans) > 0 || want >= 0 && stored != want {
		fx.t.Fatalf("Audit: %d per-order items stored (want %d), orphans %q", stored, want, orphans)
	}
}

// Orders of every outcome, with their calls cut at every step that ends
// them: at each step nothing is an orphan, and once every order ended and
// the leases and Retention passed, nothing per order is stored.
func TestEveryOrderEndsAndIsDeleted(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 1, 0, time.Minute)
		fx.audit(0)
		two := func(id string) stock.Order { return ord(id, "u1", it(lo, 1), it(hi, 1)) }
		is(t, fx.s.Deduct(fx.ctx(), ord("paid", "u1", it(lo, 1))), nil, "Deduct")
		is(t, fx.s.Confirm(fx.ctx(), "paid"), nil, "Confirm")
		is(t, fx.s.Deduct(fx.ctx(), two("gone")), nil, "Deduct")
		is(t, fx.s.Revert(fx.ctx(), "gone"), nil, "Revert")
		is(t, fx.s.Deduct(fx.ctx(), ord("late", "u2", it(lo, 2))), nil, "Deduct")
		is(t, fx.s.Deduct(fx.ctx(), two("refused")), nil, "Deduct")
		is(t, fx.s.Deduct(fx.ctx(), two("sold-out")), stock.ErrSoldOut, "Deduct of the sold-out")
		fx.hook.arm(0, 1, true)
		_ = fx.s.RevertItems(fx.ctx(), rt("r1", "late", it(lo, 2)))
		fx.hook.arm(1, 1, true)
		_ = fx.s.RevertItems(fx.ctx(), rt("r1", "late", it(lo, 2)))
		fx.hook.arm(0, 0, false)
		drop := &dropHook{}
		fx.c.AddHook(drop)
		drop.arm(fx.s.DirKey("refused"))
		_ = fx.s.Revert(fx.ctx(), "refused")
		drop.arm("")
		is(t, fx.s.Deduct(fx.ctx(), ord("held", "u3", it(lo, 1))), nil, "Deduct")
		fx.audit(-1)
		for range 3 {
			elapse(fx, stock.DefaultHoldTTL+2*time.Hour)
			fx.reclaim()
			fx.audit(-1)
		}
		fx.audit(0)
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 1, 0, 0)
	})
}

// A multi-slot Revert that meets a line record it cannot read (written by
// something other than the Store) never answers nil while a line of the
// order stays held: it refuses with an unexpected reply before it reverts
// any slot group.
func TestClusterRevertNeverAnswersNilWithALineHeld(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct")
		if err := fx.c.HSet(fx.ctx(), fx.cfg.Prefix+":{"+hi+"}:lines", "o1", "h1\tbad").Err(); err != nil {
			t.Fatal(err)
		}
		if err := fx.s.Revert(fx.ctx(), "o1"); err == nil {
			for _, sku := range []string{lo, hi} {
				if lv, lerr := fx.s.Levels(fx.ctx(), sku); lerr != nil || lv.Held != 0 {
					t.Fatalf("Revert answered nil, but %s: %+v, %v; want nothing held", sku, lv, lerr)
				}
			}
		}
	})
}
