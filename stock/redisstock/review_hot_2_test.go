package redisstock_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// An order ID whose old record and entry are past Retention (read as
// absent, not yet deleted by the reclaimer) is a new order to the general
// script. The hot script answers it 15 and the Store sends it after the
// rest of the batch, so the orders queued behind it are decided first: in
// a batch [x (reused ID), y (new)] for the one unit left, the batch script
// and one-by-one calls give the unit to x and refuse y; the hot path gives
// it to y and refuses x.
func TestReviewHotReusedIDIsDecidedAfterTheOrdersBehindIt(t *testing.T) {
	run := func(t *testing.T, fx *batchFixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Second})
		fx.sale("a", 1, 0, time.Minute)
		b := sameSlot(2)[1] // in a's slot: on a Cluster the batches are per slot
		fx.sale(b, 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("x", "u9", it("a", 1))), nil, "Deduct x (the ID's first order)")
		is(t, fx.s.Revert(fx.ctx(), "x"), nil, "Revert x")
		elapse(fx.fixture, 1500*time.Millisecond) // x's record and entry are past Retention
		if fx.hasRecord("a", "x") {
			t.Fatal("setup: x's record still reads")
		}
		fx.want("a", 1, 0, 0)
		blockers := fx.block(b) // the in-flight slots, on another SKU
		errs := make([]error, 2)
		var wg sync.WaitGroup
		fx.enqueue(fx.ctx(), ord("x", "u1", it("a", 1)), 1, &errs[0], &wg) // the reused ID, first in the queue
		fx.enqueue(fx.ctx(), ord("y", "u2", it("a", 1)), 2, &errs[1], &wg)
		fx.gate.open()
		wg.Wait()
		for _, err := range blockers() {
			is(t, err, nil, "blocker")
		}
		fx.want("a", 0, 1, 0)
		if errs[0] != nil || !errors.Is(errs[1], stock.ErrSoldOut) {
			t.Fatalf("batch [x, y] with 1 unit left: x %v, y %v; want x nil, y ErrSoldOut (the batch script's and the one-by-one answer)", errs[0], errs[1])
		}
	}
	t.Run("one server", func(t *testing.T) { eachBatched(t, run) })
	t.Run("slot", func(t *testing.T) { eachSlotBatched(t, run) })
}

// On a Cluster the general path gives an order the deadline of its own
// Deduct call (attempt.now + hold time: stock_deduct.lua takes each
// attempt's now), whatever time its slot batch waited. The hot script
// takes one now for the batch, read when the batch is sent
// (deductHotSlot), so an order that waited in the queue gets a later
// deadline and bound than the same order through stock_deduct.lua.
func TestReviewHotSlotDeadlineIsTheBatchSendTime(t *testing.T) {
	eachSlotBatched(t, func(t *testing.T, fx *batchFixture) {
		fx.sale("a", 10, 0, time.Minute)
		b := sameSlot(2)[1]
		fx.sale(b, 10, 0, time.Minute)
		t0 := fx.clock.Now()
		blockers := fx.block(b)
		var err error
		var wg sync.WaitGroup
		fx.enqueue(fx.ctx(), ord("o1", "u1", it("a", 1)), 1, &err, &wg) // Deduct called at t0
		fx.clock.Advance(30 * time.Second)                              // its batch leaves 30s later
		fx.gate.open()
		wg.Wait()
		blockers()
		is(t, err, nil, "Deduct o1")
		if dl := fx.field("a", "o1", "dl"); dl != strconv.FormatInt(t0.Add(time.Minute).UnixMilli(), 10) {
			t.Fatalf("o1's deadline %s (t0 + %v), want t0 + 1m as stock_deduct.lua gives (the attempt's now)",
				dl, time.UnixMilli(mustInt(t, dl)).Sub(t0))
		}
	})
}

func mustInt(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
