package redisstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// An order ID takes stock at most once: while the order o1 holds units,
// a Deduct of other items under o1 is stock.ErrConflict. Here a Confirm
// runs between o1's bind and its take, and a reclaim pass two minutes
// later (the take still on its way, the hold an hour long); once o1 holds
// its units, the ID must not take other items.
func TestGapConfirmThenReclaimKeepsTheIDTaken(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Hour)
		fx.sale("b", 10, 0, time.Hour)
		h := holdTake(fx.c, "o1", 1)
		done := make(chan error, 1)
		go func() { done <- fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))) }()
		h.heldNow(t)
		if err := fx.s.Confirm(fx.ctx(), "o1"); !errors.Is(err, stock.ErrUnknownOrder) {
			t.Fatalf("Confirm before the take: %v, want ErrUnknownOrder", err)
		}
		fx.clock.Advance(2 * time.Minute)
		if _, err := fx.s.ReclaimExpired(fx.ctx(), 100); err != nil {
			t.Fatalf("reclaim: %v", err)
		}
		h.let()
		is(t, <-done, nil, "Deduct of o1")
		fx.want("a", 8, 2, 0)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u2", it("b", 3))), stock.ErrConflict, "Deduct of other items under o1, which holds")
		fx.want("b", 10, 0, 0)
	})
}
