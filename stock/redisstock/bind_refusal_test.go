package redisstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// The entry of an order that took nothing ends within its attempt lease.
// A Cluster bind queued its member in the open zset (now + one lease)
// before it knew whether its HSETNX created the entry, so a Deduct of
// other items under the ID, refused with ErrConflict, moved the check of
// an abandoned entry one lease later: a client trying the ID once a lease
// kept it bound for ever.
func TestClusterConflictingDeductDoesNotPostponeAnAbandonedBind(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi, lease := abandonBind(t, fx, 0)
		elapse(fx, lease/2)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u2", it(hi, 2))), stock.ErrConflict, "another order under o1 within the lease")
		elapse(fx, lease/2+time.Minute) // one attempt lease after the bind, and a minute
		fx.reclaim()
		if fx.entryKept("o1") {
			t.Errorf("the abandoned bind's entry is still stored one attempt lease after its bind and a reclaim pass")
		}
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u2", it(hi, 2))), nil, "the ID reused for other items after the lease")
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 8, 2, 0)
	})
}

// An order on two slots that took its first group and was refused on the
// second undoes the first group, then leaves its directory entry. When
// the undo failed (the first group's master did not answer), the attempt
// left the entry all the same, and the last attempt to leave deleted it:
// the hold it left counted on an entry that was gone. The entry stays
// until the hold ends, through the caller's retry, and the reclaimer
// returns the hold at its deadline and ends the entry.
func TestClusterFailedUndoKeepsTheEntryOfTheHoldItLeft(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 1, 0, time.Minute)
		// The same path once whole, so that every script it runs is loaded
		// (no NOSCRIPT round trip in the counts below).
		is(t, fx.s.Deduct(fx.ctx(), ord("w", "u0", it(lo, 1), it(hi, 2))), stock.ErrSoldOut, "warm-up order")
		fx.want(lo, 10, 0, 0)

		// Scripts: take lo (1), take hi (2, sold out), undo lo (3: never
		// sent), leave the entry (4).
		fx.hook.arm(2, 1, true)
		err := fx.s.Deduct(fx.ctx(), ord("x", "u1", it(lo, 3), it(hi, 2)))
		fx.hook.arm(0, 0, false)
		if !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("Deduct whose undo failed: %v, want an unknown outcome", err)
		}
		fx.want(lo, 7, 3, 0) // the undo never ran: x holds 3 of lo
		if !fx.entryKept("x") {
			t.Fatalf("x's directory entry was deleted though x still holds 3 units of %s", lo)
		}
		// The caller's retry finds the hold, is refused on hi again, and
		// leaves with its own attempt: the first is still on the hold.
		if err := fx.s.Deduct(fx.ctx(), ord("x", "u1", it(lo, 3), it(hi, 2))); !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("retry of x: %v, want an unknown outcome (x holds 3 of %s)", err, lo)
		}
		if !fx.entryKept("x") {
			t.Fatalf("x's directory entry was deleted by the retry though x still holds 3 units of %s", lo)
		}
		fx.clock.Advance(2 * time.Minute) // past the hold's deadline (the Stores' clock)
		fx.reclaim()
		fx.want(lo, 10, 0, 0)
		is(t, fx.s.Deduct(fx.ctx(), ord("x", "u1", it(lo, 3), it(hi, 2))), stock.ErrHoldExpired, "x after the reclaimer returned its hold")
	})
}
