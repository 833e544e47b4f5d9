package redisstock_test

import (
	"testing"
	"time"
)

// A reclaim pass that stops after its scripts returned the holds and
// before it ended the orders (its last call never sent) leaves them in the
// SKU's ends zset; a later pass finishes them: the directory entry gets its
// Retention (it kept none, binding the ID for ever), and nothing is left
// to finish.
func TestReclaimStoppedBeforeEndingOrdersIsFinishedLater(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		// A first pass that runs whole (the server then has the scripts).
		is(t, fx.s.Deduct(fx.ctx(), ord("o0", "u0", it("a", 1))), nil, "Deduct o0")
		fx.clock.Advance(2 * time.Minute)
		if got, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil || len(got) != 1 {
			t.Fatalf("ReclaimExpired = %+v, %v; want o0", got, err)
		}
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))), nil, "Deduct")
		fx.clock.Advance(2 * time.Minute)
		fx.hook.arm(1, 1, true) // the reclaim script runs, the call that ends the order is never sent
		_, err := fx.s.ReclaimExpired(fx.ctx(), 10)
		fx.hook.arm(0, 0, false)
		if err == nil {
			t.Fatal("ReclaimExpired whose last call was never sent: nil")
		}
		fx.want("a", 10, 0, 0)
		ends := fx.cfg.Prefix + ":{a}:ends"
		if ttl := fx.entryTTL("o1"); ttl != -1 {
			t.Fatalf("directory entry's PTTL after the stopped pass = %v, want none yet", ttl)
		}
		fx.clock.Advance(2 * time.Minute) // past the grace a running pass has
		if got, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil || len(got) != 0 {
			t.Fatalf("later ReclaimExpired = %+v, %v; want nothing returned, no error", got, err)
		}
		if ttl := fx.entryTTL("o1"); ttl <= 0 {
			t.Fatalf("directory entry's PTTL after the later pass = %v, want its Retention", ttl)
		}
		if n := fx.c.ZCard(fx.ctx(), ends).Val(); n != 0 {
			t.Fatalf("%d orders left to finish, want 0", n)
		}
		fx.want("a", 10, 0, 0)
	})
}

// On a Cluster, a half-confirmed order (its Confirm stopped after the
// first slot group) whose held line a pass returned, the pass stopping
// before it expired the confirmed line: a later pass expires it, with no
// Confirm or Revert of the order needed, so the units do not stay sold.
func TestClusterHalfConfirmedOrderOfAStoppedPassIsFinishedLater(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := halfConfirmedStoppedPass(t, fx)
		fx.clock.Advance(2 * time.Minute)
		if _, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil {
			t.Fatalf("later ReclaimExpired: %v", err)
		}
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
	})
}
