package redisstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// halfConfirmedShortRetention sells o1 (2 units of lo, 1 of hi: two
// slots) for an hour on a Store whose Retention is a minute, and confirms
// it: the Confirm applies its first group (lo) and stops, its reply lost.
// Ten minutes pass, and two reclaim passes run: longer than Retention
// after lo's confirmation, well before the order's deadline.
func halfConfirmedShortRetention(t *testing.T, fx *fixture) (lo, hi string) {
	t.Helper()
	fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Minute})
	lo, hi = skusInSlotOrder(t, fx)
	fx.sale(lo, 10, 0, time.Hour)
	fx.sale(hi, 10, 0, time.Hour)
	is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2), it(hi, 1))), nil, "Deduct")
	fx.hook.arm(0, 1, false)
	err := fx.s.Confirm(fx.ctx(), "o1")
	fx.hook.arm(0, 0, false)
	if !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Confirm with its first group's reply lost: %v, want ErrUnknownOutcome", err)
	}
	fx.want(lo, 8, 0, 2)
	fx.want(hi, 9, 1, 0)
	elapse(fx, 10*time.Minute)
	fx.reclaim()
	fx.reclaim()
	return lo, hi
}

// A Confirm of an order on several slots that stopped after its first
// group leaves that group confirmed while the order still holds the rest.
// Those confirmed lines must be read until the order has ended, however
// short Retention is: a retry of the Confirm confirms the rest.
func TestHalfConfirmedOrderRetriedAfterRetention(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := halfConfirmedShortRetention(t, fx)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm retried 10 minutes later")
		fx.want(lo, 8, 0, 2)
		fx.want(hi, 9, 0, 1)
	})
}

// The same half-confirmed order, never retried: at its deadline the
// reclaimer returns the held line and expires the confirmed ones, so no
// unit stays sold for an order that was never sold, however short
// Retention is.
func TestHalfConfirmedOrderExpiresWholeAfterRetention(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := halfConfirmedShortRetention(t, fx)
		elapse(fx, 50*time.Minute+30*time.Second) // past the deadline, within Retention of it
		fx.reclaim()
		fx.reclaim()
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
		orphans, _, err := fx.s.Audit(fx.ctx())
		if err != nil || len(orphans) != 0 {
			t.Errorf("Audit: orphans %q, %v", orphans, err)
		}
	})
}
