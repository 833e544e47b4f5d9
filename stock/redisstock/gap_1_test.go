package redisstock_test

import (
	"testing"

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
		gapInGap(t, fx, func() error { return fx.s.Confirm(fx.ctx(), "o1") }, stock.ErrUnknownOrder)
	})
}

// The same with a Revert in the gap.
func TestGapRevertThenReclaimKeepsTheBoundEntry(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		gapInGap(t, fx, func() error { return fx.s.Revert(fx.ctx(), "o1") }, stock.ErrUnknownOrder)
	})
}

// Without anything in the gap the reclaimer leaves the bound entry alone
// for the attempt's lease: the control for the two tests above.
func TestGapReclaimAloneKeepsTheBoundEntry(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		gapInGap(t, fx, func() error { return nil }, nil)
	})
}
