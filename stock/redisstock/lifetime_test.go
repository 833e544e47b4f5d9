package redisstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A SKU whose state hash is gone (flushed, evicted) is a gate that lost its
// data: Deduct, Confirm and Revert answer stock.ErrUnavailable and change
// nothing, the reclaimer still closes its due holds' records, and nothing
// ever recreates a partial count to sell from.
func TestMissingStateIsNeverRecreated(t *testing.T) {
	for _, end := range []string{"revert", "confirm", "reclaim"} {
		t.Run(end, func(t *testing.T) {
			eachMini(t, func(t *testing.T, fx *fixture) {
				fx.sale("a", 10, 1, time.Minute)
				is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1))), nil, "Deduct")
				fx.mini.Del(fx.cfg.Prefix + ":{a}:state")
				switch end {
				case "revert":
					is(t, fx.s.Revert(fx.ctx(), "o1"), stock.ErrUnavailable, "Revert")
				case "confirm":
					is(t, fx.s.Confirm(fx.ctx(), "o1"), stock.ErrUnavailable, "Confirm")
				case "reclaim":
					fx.clock.Advance(2 * time.Minute)
					if _, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil {
						t.Fatalf("ReclaimExpired: %v", err)
					}
				}
				if fx.mini.Exists(fx.cfg.Prefix + ":{a}:state") {
					t.Fatalf("%s recreated the state hash", end)
				}
				is(t, fx.s.Deduct(fx.ctx(), ord("o2", "u2", it("a", 1))), stock.ErrUnavailable, "Deduct on the flushed SKU")
				// Put on sale again, the counts are the new listing's.
				fx.sale("a", 10, 1, time.Minute)
				fx.want("a", 10, 0, 0)
			})
		})
	}
}

// However long the reclaimer is down, a hold keeps its record: the units
// come back, and a retry of the order never takes them twice.
func TestHoldOutlivesRetentionUntilReclaimed(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		fx.sale("a", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1))), nil, "Deduct")
		fx.mini.FastForward(time.Minute + time.Hour + time.Second)
		fx.clock.Advance(time.Minute + time.Hour + time.Second)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1))), stock.ErrHoldExpired, "retry after the deadline")
		got, err := fx.s.ReclaimExpired(fx.ctx(), 10)
		if err != nil || len(got) != 1 {
			t.Fatalf("ReclaimExpired = %+v, %v; want the one hold", got, err)
		}
		fx.want("a", 10, 0, 0)
	})
}

// After a reclaim the order's directory entry lives as long as its records:
// the ID cannot be reused for other items while they are kept.
func TestReclaimKeepsTheDirectoryWithTheRecords(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1))), nil, "Deduct")
		fx.mini.FastForward(16 * time.Minute)
		fx.clock.Advance(16 * time.Minute)
		if got, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil || len(got) != 1 {
			t.Fatalf("ReclaimExpired = %+v, %v", got, err)
		}
		fx.mini.FastForward(time.Hour - 30*time.Second)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("b", 1))), stock.ErrConflict, "same ID, other items, within retention")
		fx.want("b", 10, 0, 0)
	})
}

func TestRetentionBelowMinimumIsRefused(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		_, err := redisstock.New(fx.c, redisstock.Config{Retention: time.Microsecond})
		is(t, err, stock.ErrInvalid, "Retention of 1µs")
	})
}

// An ended order whose entry is still read takes no new line, on every
// backend: a repeat Deduct that finds a line without its record (purged
// once its end passed, while the entry's end is later) answers
// stock.ErrOrderClosed and takes nothing, as the Cluster's bind "ended"
// does. On one server the Deduct's script took the line again, selling a
// confirmed order's units twice.
func TestRepeatOfAnEndedOrderMissingALineTakesNothing(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		o := ord("o1", "u1", it("a", 1), it("b", 1))
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct")
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm")
		if err := fx.c.HDel(fx.ctx(), fx.s.LinesKey("a"), "o1").Err(); err != nil {
			t.Fatal(err)
		}
		is(t, fx.s.Deduct(fx.ctx(), o), stock.ErrOrderClosed, "repeat Deduct of the ended order")
		fx.want("a", 9, 0, 1)
		fx.want("b", 9, 0, 1)
	})
}
