package redisstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// A Confirm that runs between a Deduct's bind and its take finds no line
// and answers that the order is unknown, leaving the entry to the take.
// It must not shorten the time the reclaimer leaves an entry bound by a
// live attempt: a reclaim pass a minute later, while the take is still on
// its way, must not delete the entry the attempt bound. Once the take
// holds the units and the Deduct answered nil, the order must be
// confirmable before its deadline.
func TestGapConfirmThenReclaimKeepsTheBoundEntry(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Hour)
		h := holdTake(fx.c, "o1", 1)
		done := make(chan error, 1)
		go func() { done <- fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))) }()
		h.heldNow(t)
		if err := fx.s.Confirm(fx.ctx(), "o1"); !errors.Is(err, stock.ErrUnknownOrder) {
			t.Fatalf("Confirm before the take: %v, want ErrUnknownOrder", err)
		}
		fx.clock.Advance(2 * time.Minute) // well inside the hold time
		if _, err := fx.s.ReclaimExpired(fx.ctx(), 100); err != nil {
			t.Fatalf("reclaim: %v", err)
		}
		h.let()
		is(t, <-done, nil, "Deduct whose take ran after the Confirm and the reclaim pass")
		fx.want("a", 8, 2, 0)
		if _, ends, ok, err := fx.s.Entry(fx.ctx(), "o1"); err != nil || !ok || ends != 0 {
			t.Errorf("entry of the held order o1: ok %v, ends at %d (err %v); want live, no end", ok, ends, err)
		}
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm of the held order o1 before its deadline")
		fx.want("a", 8, 0, 2)
	})
}

// The same with a Revert in the gap.
func TestGapRevertThenReclaimKeepsTheBoundEntry(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Hour)
		h := holdTake(fx.c, "o1", 1)
		done := make(chan error, 1)
		go func() { done <- fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))) }()
		h.heldNow(t)
		if err := fx.s.Revert(fx.ctx(), "o1"); !errors.Is(err, stock.ErrUnknownOrder) {
			t.Fatalf("Revert before the take: %v, want ErrUnknownOrder", err)
		}
		fx.clock.Advance(2 * time.Minute)
		if _, err := fx.s.ReclaimExpired(fx.ctx(), 100); err != nil {
			t.Fatalf("reclaim: %v", err)
		}
		h.let()
		is(t, <-done, nil, "Deduct whose take ran after the Revert and the reclaim pass")
		fx.want("a", 8, 2, 0)
		if _, ends, ok, err := fx.s.Entry(fx.ctx(), "o1"); err != nil || !ok || ends != 0 {
			t.Errorf("entry of the held order o1: ok %v, ends at %d (err %v); want live, no end", ok, ends, err)
		}
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm of the held order o1 before its deadline")
		fx.want("a", 8, 0, 2)
	})
}

// Without anything in the gap the reclaimer leaves the bound entry alone
// for the attempt's lease: the control for the two tests above.
func TestGapReclaimAloneKeepsTheBoundEntry(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Hour)
		h := holdTake(fx.c, "o1", 1)
		done := make(chan error, 1)
		go func() { done <- fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))) }()
		h.heldNow(t)
		fx.clock.Advance(2 * time.Minute)
		if _, err := fx.s.ReclaimExpired(fx.ctx(), 100); err != nil {
			t.Fatalf("reclaim: %v", err)
		}
		h.let()
		is(t, <-done, nil, "Deduct")
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm")
		fx.want("a", 8, 0, 2)
	})
}
