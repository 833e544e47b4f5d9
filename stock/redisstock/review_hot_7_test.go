package redisstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// An ID whose entry is past Retention (not yet deleted) is bound anew by
// the HSETNX path's bind script; the old entry's gone item, due, must not
// delete the new entry.
func TestReviewHotBindOverEntryPastRetention(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Second})
		fx.sale("a", 10, 0, time.Hour)
		fx.sale("b", 10, 0, time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1))), nil, "Deduct o1")
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm o1")
		elapse(fx, 1500*time.Millisecond)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u2", it("b", 2))), nil, "o1's ID after Retention, other items")
		fx.reclaim() // the old record's and entry's gone items are due
		if fx.entryTTL("o1") != -1 {
			t.Fatalf("the new o1's entry: %v", fx.entryTTL("o1"))
		}
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u3", it("a", 1))), stock.ErrConflict, "a third order under o1")
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm the new o1")
		fx.want("b", 8, 0, 2)
		fx.want("a", 9, 0, 1)
	})
}
