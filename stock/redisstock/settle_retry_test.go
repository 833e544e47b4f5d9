package redisstock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock/redisstock"
)

// A Confirm or Revert of an order on two slots whose lines ended but whose
// call ending the entry failed (an unknown outcome): the retry, answered
// as a repeat, completes it and ends the entry itself, as a first call
// does (no reclaim pass in between).
func TestRetryAfterALostEntryEndEndsTheEntry(t *testing.T) {
	for _, settle := range []string{"Confirm", "Revert"} {
		t.Run(settle, func(t *testing.T) {
			eachMiniCluster(t, func(t *testing.T, fx *fixture) {
				_, _, drop := lostEntryEnd(t, fx, time.Hour)
				call := settler(fx.s, settle)
				unknown(t, call(fx.ctx(), "o1"), settle+" whose entry's end was lost")
				drop.arm("")
				is(t, call(fx.ctx(), "o1"), nil, "the retry")
				if _, ends, ok, err := fx.s.Entry(fx.ctx(), "o1"); err != nil || !ok || ends == 0 {
					t.Errorf("entry of o1 after the retry answered nil: read %v, ends at %d (err %v); want ended", ok, ends, err)
				}
			})
		})
	}
}

// The same Confirm, retried, and a duplicate of the order's Deduct (a
// repeat, which takes nothing): the entry of the confirmed order must end
// with the order, so once Retention has passed since the Confirm (with
// reclaim passes all along) the order ID is free for another order.
func TestConfirmedOrderIDFreeAfterRetention(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi, drop := lostEntryEnd(t, fx, time.Hour)
		keep := fx.s.Retention()
		o := ord("o1", "u1", it(lo, 1), it(hi, 1))
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm whose entry's end was lost")
		drop.arm("")
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "the retry")
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "a duplicate of the Deduct")
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 0, 1)
		for range 4 {
			elapse(fx, keep/2)
			fx.reclaim()
		}
		// Two Retentions after the order ended.
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u2", it(lo, 2))), nil, "the ID reused for other items")
		fx.want(lo, 7, 2, 1)
	})
}

// lostEntryEnd puts lo and hi (two slots) on sale, each with the hold time
// hold, on a Store whose Retention is an hour, deducts o1 (a unit of
// each), and arms a hook that fails the call ending o1's directory entry
// (drop.arm("") disarms it).
func lostEntryEnd(t *testing.T, fx *fixture, hold time.Duration) (lo, hi string, drop *dropHook) {
	t.Helper()
	fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
	lo, hi = skusInSlotOrder(t, fx)
	fx.sale(lo, 10, 0, hold)
	fx.sale(hi, 10, 0, hold)
	is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct")
	drop = &dropHook{}
	fx.c.AddHook(drop)
	drop.arm(fx.s.DirKey("o1"))
	return lo, hi, drop
}

// settler is s's Confirm or its Revert, by name.
func settler(s *redisstock.Store, name string) func(context.Context, string) error {
	if name == "Revert" {
		return s.Revert
	}
	return s.Confirm
}
