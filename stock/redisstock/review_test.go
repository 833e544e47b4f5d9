package redisstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A refused Cluster attempt that found no record of the order leaves the
// directory entry while another attempt of the same order (a retry on
// another node) has just succeeded: the live order's entry must keep no
// TTL, so its buyer can still confirm before the deadline.
func TestClusterRefusedAttemptLeavesALiveOrdersEntryAlone(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		if fx.mini == nil {
			t.Skip("needs time to be fast-forwarded")
		}
		fx.c.AddHook(pauseHook{})
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Second})
		fx.sale("a", 1, 0, 2*time.Hour)
		o := ord("o1", "u1", it("a", 2))
		a := newPause(fx.cfg.Prefix + ":order:{o1}")
		doneA := make(chan error, 1)
		go func() { doneA <- fx.s.Deduct(a.ctx(fx.ctx()), o) }()
		a.wait(t) // A was refused (sold out) and is about to leave the entry
		is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "more", SKU: "a", Units: 1}), nil, "Restock")
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "B, the retry")
		a.release()
		is(t, <-doneA, stock.ErrSoldOut, "A")
		fx.want("a", 0, 2, 0)
		// Well before the order's deadline (2h), past any lease.
		fx.mini.FastForward(stock.DefaultHoldTTL + time.Minute)
		fx.clock.Advance(stock.DefaultHoldTTL + time.Minute)
		fx.sale("b", 10, 0, time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("b", 1))), stock.ErrConflict, "the live ID with other items")
		fx.want("b", 10, 0, 0)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm of the live order")
		fx.want("a", 0, 0, 2)
	})
}
