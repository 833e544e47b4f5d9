package redisstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// elapse lets d pass on the Store's clock and on the server's (miniredis:
// its TIME moved and its TTLs fast-forwarded; a real server: sleep).
func elapse(fx *fixture, d time.Duration) {
	fx.clock.Advance(d)
	if fx.mini != nil {
		now, err := fx.c.Time(fx.ctx()).Result()
		if err != nil {
			fx.t.Fatal(err)
		}
		fx.mini.SetTime(now.Add(d))
		fx.mini.FastForward(d)
		return
	}
	time.Sleep(d)
}

// stoppedPassThenRevert leaves o1 (1 of a) expired by a pass that stopped
// before it ended the order (o1 stays in a's ends zset), reverted by the
// app (its entry gets Retention), and lets Retention pass: the record and
// the entry are gone, the ends zset still names o1.
func stoppedPassThenRevert(t *testing.T, fx *fixture) {
	t.Helper()
	fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Second})
	if err := fx.s.PutOnSale(fx.ctx(), stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	fx.sale("b", 10, 0, time.Minute)
	// A first pass that runs whole (the server then has the scripts).
	is(t, fx.s.Deduct(fx.ctx(), ord("o0", "u0", it("a", 1))), nil, "Deduct o0")
	fx.clock.Advance(2 * time.Minute)
	if _, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil {
		t.Fatal(err)
	}
	is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1))), nil, "Deduct o1")
	fx.clock.Advance(2 * time.Minute)
	fx.hook.arm(1, 1, true) // the reclaim script runs, the call ending the order is never sent
	if _, err := fx.s.ReclaimExpired(fx.ctx(), 10); err == nil {
		t.Fatal("stopped pass: nil")
	}
	fx.hook.arm(0, 0, false)
	is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "Revert of the expired o1") // the app cancels it
	elapse(fx, 1500*time.Millisecond)                                   // Retention: o1's record and entry are gone
	if fx.hasRecord("a", "o1") || fx.entryTTL("o1") != -2 {
		t.Fatalf("o1's record or entry left after Retention")
	}
	if n := fx.c.ZCard(fx.ctx(), fx.cfg.Prefix+":{a}:ends").Val(); n != 1 {
		t.Fatalf("ends zset has %d orders, want o1", n)
	}
	fx.want("a", 10, 0, 0)
}

// A new order under the ID o1 (after Retention the ID is free), paid for:
// the later pass that finishes the old o1 from a's ends zset reads the new
// order's identity from a's record and expires its confirmed line of b,
// returning a unit that was sold.
func TestReviewEndsFinishExpiresNewerOrdersSale(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		stoppedPassThenRevert(t, fx)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u2", it("a", 1), it("b", 1))), nil, "Deduct of the new o1")
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm of the new o1")
		fx.want("a", 9, 0, 1)
		fx.want("b", 9, 0, 1)
		fx.clock.Advance(2 * time.Minute) // past the ends grace
		if _, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil {
			t.Fatal(err)
		}
		fx.want("a", 9, 0, 1)
		fx.want("b", 9, 0, 1) // the new o1's sale of b stands
	})
}

// A new order under the ID o1 that is still held (a long hold): the later
// pass gives its directory entry Retention, and once that passes the held
// order cannot be confirmed.
func TestReviewEndsFinishExpiresNewerHeldOrdersEntry(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		stoppedPassThenRevert(t, fx)
		o := ord("o1", "u2", it("a", 1))
		o.HoldTTL = 10 * time.Minute
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct of the new o1")
		fx.clock.Advance(2 * time.Minute) // past the ends grace, o1 held still
		if _, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil {
			t.Fatal(err)
		}
		if ttl := fx.entryTTL("o1"); ttl != -1 {
			t.Errorf("held new o1's directory entry PTTL = %v, want none", ttl)
		}
		elapse(fx, 1500*time.Millisecond)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm of the held new o1")
		fx.want("a", 9, 0, 1)
	})
}
