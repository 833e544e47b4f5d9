package redisstock_test

import (
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
		fx.sale("b", 10, 0, time.Hour)
		gapThenReclaim(t, fx, func() error { return fx.s.Confirm(fx.ctx(), "o1") }, stock.ErrUnknownOrder)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u2", it("b", 3))), stock.ErrConflict, "Deduct of other items under o1, which holds")
		fx.want("b", 10, 0, 0)
	})
}
