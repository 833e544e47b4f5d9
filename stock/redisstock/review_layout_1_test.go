package redisstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Layout 2 replaced the records' server-side TTLs by an end time e written
// with the ending Store's clock, compared with the reader's clock, and
// deleted by the reclaimer's clock. Two Stores on one prefix whose clocks
// differ by a few seconds then disagree about Retention: a reclaimer whose
// clock runs 5s ahead deletes an order's record and directory entry while
// the Store that confirmed it (its clock right) is still 2s inside
// Retention. The refund it owes then fails with ErrUnknownOrder, and a
// retry of the order's Deduct takes the stock a second time. With TTLs
// (layout 1) both answered from the record, whatever the clocks.
func TestReviewLayoutSkewedReclaimerEndsRetentionEarly(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		const keep = time.Hour
		a := newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: keep})
		ahead := stocktest.NewClock(fx.clock.Now().Add(5 * time.Second))
		r := newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: ahead, Retention: keep})
		fx.s = a
		fx.sale("a", 10, 0, time.Minute)
		o := ord("o1", "u1", it("a", 1))
		is(t, a.Deduct(fx.ctx(), o), nil, "Deduct")
		is(t, a.Confirm(fx.ctx(), "o1"), nil, "Confirm")
		fx.want("a", 9, 0, 1)

		// 2s before the end of Retention, by the confirming Store's clock
		// (and by real time: the server's TTLs of layout 1 would still run).
		fx.clock.Advance(keep - 2*time.Second)
		ahead.Advance(keep - 2*time.Second)
		if fx.mini != nil {
			fx.mini.FastForward(keep - 2*time.Second)
		}
		if !fx.hasRecord("a", "o1") || fx.entryTTL("o1") <= 0 {
			t.Fatal("setup: the order reads as gone within Retention")
		}
		if _, err := r.ReclaimExpired(fx.ctx(), 10); err != nil {
			t.Fatal(err)
		}
		if !fx.hasRecord("a", "o1") {
			t.Errorf("a reclaimer whose clock is 5s ahead deleted the confirmed line's record 2s before its Retention ended")
		}
		if err := a.Revert(fx.ctx(), "o1"); err != nil {
			t.Errorf("refund within Retention: %v, want nil", err)
		}
		err := a.Deduct(fx.ctx(), o)
		if err == nil {
			lv, _ := a.Levels(fx.ctx(), "a")
			t.Errorf("a retried Deduct of o1 within Retention took the stock again: %+v", lv)
		}
	})
}
