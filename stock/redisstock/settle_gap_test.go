package redisstock_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// On a Cluster a Deduct binds its order ID (the directory entry) and then
// queues its take on the slot's batcher. A Confirm or a Revert of the
// same ID that runs in between finds the entry but no line: it answers
// that the order is unknown, and must leave the entry as it is. The take
// then holds the units and the Deduct answers nil: the order lives, so its
// entry must live too (it is the order's record, the last of its items to
// end). Once Retention has passed since that call, the order must still be
// confirmable while its hold is before its deadline.
func TestSettleBetweenBindAndTakeLeavesTheEntry(t *testing.T) {
	for _, settle := range []string{"Confirm", "Revert"} {
		t.Run(settle, func(t *testing.T) {
			eachSlotBatched(t, func(t *testing.T, fx *batchFixture) {
				// Records and entries of ended orders are read for a second only.
				fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: redisstock.MinRetention})
				fx.sale("a", 10, 0, time.Hour)
				blockers := fx.block("a")
				var err error
				var wg sync.WaitGroup
				fx.enqueue(fx.ctx(), ord("o1", "u1", it("a", 2)), 1, &err, &wg)
				// The ID is bound, the take queued: the call now finds no line.
				call := settler(fx.s, settle)
				if cerr := call(fx.ctx(), "o1"); !errors.Is(cerr, stock.ErrUnknownOrder) {
					t.Fatalf("%s before the take: %v, want ErrUnknownOrder", settle, cerr)
				}
				fx.gate.open()
				wg.Wait()
				for _, e := range blockers() {
					is(t, e, nil, "blocker")
				}
				is(t, err, nil, "Deduct whose take ran after the "+settle)
				fx.want("a", 6, 4, 0) // the blockers' 2 and o1's 2 are held
				if _, ends, ok, e := fx.s.Entry(fx.ctx(), "o1"); e != nil || !ok || ends != 0 {
					t.Errorf("entry of the held order o1: ok %v, ends at %d (err %v); want live, no end", ok, ends, e)
				}
				// Retention passes by the server's clock; the hold's deadline
				// (an hour, by the Store's clock) is far off.
				if fx.mini != nil {
					fx.mini.SetTime(time.Now().Add(3 * time.Second))
				} else {
					time.Sleep(2 * redisstock.MinRetention)
				}
				is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm of the held order o1 before its deadline")
				fx.want("a", 6, 2, 2)
			})
		})
	}
}

// A Revert of an order that never took stock changes nothing, and a failed
// Deduct leaves its order ID free. Here the Revert comes between the bind
// and the take of a Deduct that is then refused (sold out): once stock is
// back, the same order must be taken.
func TestRevertBeforeARefusedTakeLeavesTheIDFree(t *testing.T) {
	eachSlotBatched(t, func(t *testing.T, fx *batchFixture) {
		fx.sale("a", 10, 0, time.Hour)
		blockers := fx.block("a")
		var err error
		var wg sync.WaitGroup
		fx.enqueue(fx.ctx(), ord("o1", "u1", it("a", 20)), 1, &err, &wg)
		rerr := fx.s.Revert(fx.ctx(), "o1")
		if !errors.Is(rerr, stock.ErrUnknownOrder) {
			t.Fatalf("Revert of an order that took nothing: %v, want ErrUnknownOrder", rerr)
		}
		fx.gate.open()
		wg.Wait()
		for _, e := range blockers() {
			is(t, e, nil, "blocker")
		}
		is(t, err, stock.ErrSoldOut, "Deduct of 20 of 8")
		fx.want("a", 8, 2, 0)
		is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "r1", SKU: "a", Units: 20}), nil, "restock")
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 20))), nil, "the same order once stock is back")
		fx.want("a", 8, 22, 0)
	})
}

// Every call that settles an order still ends its directory entry itself,
// once its lines answered: a Confirm, a Confirm past the deadline (which
// expires the order), a Revert, and a return of all the order took.
func TestSettlingCallsEndTheEntry(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		for _, id := range []string{"c", "x", "v", "r"} {
			is(t, fx.s.Deduct(fx.ctx(), ord(id, "u-"+id, it("a", 1))), nil, "Deduct "+id)
		}
		is(t, fx.s.Confirm(fx.ctx(), "c"), nil, "Confirm")
		is(t, fx.s.Revert(fx.ctx(), "v"), nil, "Revert")
		is(t, fx.s.RevertItems(fx.ctx(), stock.Return{OpID: "r1", OrderID: "r", Items: []stock.Item{it("a", 1)}}), nil, "RevertItems")
		fx.clock.Advance(2 * time.Minute)
		is(t, fx.s.Confirm(fx.ctx(), "x"), stock.ErrHoldExpired, "Confirm past the deadline")
		for _, id := range []string{"c", "x", "v", "r"} {
			if _, ends, ok, err := fx.s.Entry(fx.ctx(), id); err != nil || !ok || ends == 0 {
				t.Errorf("entry of %s: ok %v, ends at %d (err %v); want ended", id, ok, ends, err)
			}
		}
		fx.want("a", 9, 0, 1)
	})
}
