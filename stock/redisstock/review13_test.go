package redisstock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// afterScript runs fn once, right after the first pipeline carrying the
// script sha has run (between that call's round trip and its caller's
// next one).
type afterScript struct {
	mu  sync.Mutex
	sha string
	fn  func()
}

func (h *afterScript) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *afterScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *afterScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.mu.Lock()
		fn := h.fn
		if fn != nil && has(cmds, h.sha) {
			h.fn = nil
		} else {
			fn = nil
		}
		h.mu.Unlock()
		if fn != nil {
			fn()
		}
		return err
	}
}

// A partial return that lands between Snapshot's script and its read of
// the holds' quantities: the snapshot is one instant, so the holds it
// reports add up to the held count it reports. (Before, the quantity was
// read after the return, while the counts were read before it: a
// reconciler then counted the returned units as on their way back, and
// raised Redis by them a second time.)
func TestReview13SnapshotHoldsAddUpToHeldAcrossAReturn(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 5))), nil, "Deduct")
		h := &afterScript{sha: redis.NewScript(lua.Source("stock_snapshot.lua")).Hash()}
		var rerr error
		h.fn = func() { rerr = fx.s.RevertItems(fx.ctx(), rt("r1", "o1", it("a", 2))) }
		fx.c.AddHook(h)
		got, err := fx.s.Snapshot(fx.ctx(), []redisstock.SnapshotRequest{{SKU: "a"}})
		if err != nil {
			t.Fatal(err)
		}
		is(t, rerr, nil, "RevertItems between the snapshot's round trips")
		sum := int64(0)
		for _, hd := range got[0].Holds {
			sum += hd.Qty
		}
		if sum != got[0].Held || got[0].Available+got[0].Held != 10 {
			t.Fatalf("snapshot available %d, held %d, holds %+v (%d units): not one instant",
				got[0].Available, got[0].Held, got[0].Holds, sum)
		}
		fx.want("a", 7, 3, 0)
	})
}

// dropAfterFirst sends only the first command of the first pipeline that
// carries the script sha and loses the rest (one node of a Cluster got its
// part, the process died before the others'); the caller sees a lost reply.
type dropAfterFirst struct {
	mu    sync.Mutex
	sha   string
	armed bool
}

func (h *dropAfterFirst) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *dropAfterFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *dropAfterFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		hit := h.armed && len(cmds) > 1 && has(cmds, h.sha)
		if hit {
			h.armed = false
		}
		h.mu.Unlock()
		if !hit {
			return next(ctx, cmds)
		}
		_ = next(ctx, cmds[:1])
		for _, c := range cmds {
			c.SetErr(errLostReply)
		}
		return errLostReply
	}
}

// A return of an order on two slots applied on one of them (the call an
// unknown outcome) stays the order's return in progress until its retry
// completes it: another return of the order must not run in between,
// however long the caller takes to retry. (Before, the return lock ended
// with its 30s lease: another return then checked the lines the first had
// not reached, was applied and told nil, and the first's retry, told nil
// too, gave back nothing on the line the other had emptied: two returns
// told nil for four units of a line of two.)
func TestReview13HalfAppliedReturnKeepsTheOrderUntilRetried(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2), it(hi, 2))), nil, "Deduct")
		h := &dropAfterFirst{sha: redis.NewScript(lua.Source("stock_return.lua")).Hash(), armed: true}
		fx.c.AddHook(h)
		r1 := rt("r1", "o1", it(lo, 1), it(hi, 2))
		unknown(t, fx.s.RevertItems(fx.ctx(), r1), "RevertItems applied on one slot")
		fx.want(lo, 9, 1, 0)
		fx.want(hi, 8, 2, 0)

		// The lease passes: a lock that lives no longer than ReturnLease
		// is gone.
		lock := fx.cfg.Prefix + ":rl:{o1}"
		if ttl := fx.c.PTTL(fx.ctx(), lock).Val(); ttl > 0 && ttl <= redisstock.ReturnLease+time.Second {
			fx.c.Del(fx.ctx(), lock)
		}
		told := map[string]int64{}
		r2 := rt("r2", "o1", it(hi, 2))
		err := fx.s.RevertItems(fx.ctx(), r2)
		first := err == nil
		switch {
		case first:
			told[hi] += 2
		case errors.Is(err, stock.ErrContention):
		default:
			t.Fatalf("another return while the first is half applied: %v", err)
		}
		is(t, fx.s.RevertItems(fx.ctx(), r1), nil, "the retry of the first return")
		told[lo]++
		told[hi] += 2
		err = fx.s.RevertItems(fx.ctx(), r2)
		switch {
		case first:
			is(t, err, nil, "a repeat of the other return")
		case !errors.Is(err, stock.ErrExceedsOrder):
			t.Fatalf("the other return, after the first completed: %v, want ErrExceedsOrder", err)
		}
		got, err := fx.s.Orders(fx.ctx(), []string{"o1"})
		if err != nil {
			t.Fatal(err)
		}
		back := map[string]int64{}
		for _, x := range got[0].Returned {
			back[x.SKU] = x.Qty
		}
		if back[lo] != told[lo] || back[hi] != told[hi] {
			t.Fatalf("returns told nil gave back %v, the order's Returned is %v", told, back)
		}
		fx.want(lo, 9, 1, 0)
		fx.want(hi, 10, 0, 0)
	})
}
