package redisstock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// betweenHook runs, once armed, between() inside the first pipeline that
// cut accepts: after its first cut commands and before the rest (the
// server runs other clients' commands between any two commands of a
// pipeline, which is not a transaction). cut answers -1 for a pipeline it
// leaves alone.
type betweenHook struct {
	armed   atomic.Bool
	cut     func(cmds []redis.Cmder) int
	between func()
}

func (h *betweenHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *betweenHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *betweenHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := h.cut(cmds)
		if n < 0 || !h.armed.CompareAndSwap(true, false) {
			return next(ctx, cmds)
		}
		var err error
		if n > 0 {
			err = next(ctx, cmds[:n])
		}
		h.between()
		if n < len(cmds) {
			if err2 := next(ctx, cmds[n:]); err == nil {
				err = err2
			}
		}
		return err
	}
}

// hookedReader is a second Store on fx's servers and prefix whose client
// (of the same kind as fx's) runs h.
func hookedReader(t *testing.T, fx *fixture, h *betweenHook) *redisstock.Store {
	var rc redis.UniversalClient
	switch c := fx.c.(type) {
	case *redis.Client:
		rc = redis.NewClient(&redis.Options{Addr: c.Options().Addr})
	case *redis.ClusterClient:
		rc = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Options().Addrs})
	default:
		t.Fatalf("a client of type %T", fx.c)
	}
	t.Cleanup(func() { rc.Close() })
	rc.AddHook(h)
	return newStore(t, rc, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock})
}

// A hold live before, during and after HeldOrders is listed. A reclaim
// pass moves the due holds it does not return from the hold queue's head
// into the holds zset; run between HeldOrders' two reads (the zset, then
// the queue), it left such a hold in neither as read.
func TestHeldOrdersListsAHoldMovedFromQueueToZsetMeanwhile(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		h := &betweenHook{cut: func(cmds []redis.Cmder) int {
			if len(cmds) != 2 {
				return -1
			}
			if names := cmds[0].Name() + " " + cmds[1].Name(); names != "zrange lrange" && names != "lrange zrange" {
				return -1
			}
			return 1
		}}
		reader := hookedReader(t, fx, h)

		fx.sale("a", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1))), nil, "Deduct o1")
		is(t, fx.s.Deduct(fx.ctx(), ord("o2", "u2", it("a", 1))), nil, "Deduct o2")
		fx.clock.Advance(2 * time.Minute) // both due, neither returned yet

		var reclaimed []string
		h.between = func() {
			got, err := fx.s.ReclaimExpired(context.Background(), 1)
			if err != nil {
				t.Errorf("ReclaimExpired: %v", err)
			}
			for _, r := range got {
				reclaimed = append(reclaimed, r.OrderID)
			}
		}
		h.armed.Store(true)
		during, err := reader.HeldOrders(fx.ctx(), "a")
		if err != nil {
			t.Fatal(err)
		}
		if len(reclaimed) != 1 {
			t.Fatalf("the pass between the reads returned %v; want one hold", reclaimed)
		}
		live := "o2"
		if reclaimed[0] == "o2" {
			live = "o1"
		}
		fx.want("a", 9, 1, 0) // live is still held
		found := false
		for _, hd := range during {
			found = found || hd.OrderID == live
		}
		if !found {
			t.Fatalf("HeldOrders read while a pass ran = %+v: misses %s, held before, during and after it (the pass returned %v)", during, live, reclaimed)
		}
	})
}

// Every hold of a Snapshot has its quantity as of the instant the
// snapshot's counts are of: the holds add up to Held. A hold confirmed
// and then refunded in part between Snapshot's two round trips moved no
// rn (only returns of held lines did), so Snapshot reported the count of
// the first instant beside the quantity left after the refund.
func TestSnapshotHoldsAddUpWhenAHoldIsConfirmedAndRefundedMeanwhile(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		h := &betweenHook{cut: func(cmds []redis.Cmder) int {
			if len(cmds) > 0 && cmds[0].Name() == "hmget" {
				return 0 // before the round trip that reads the holds' records
			}
			return -1
		}}
		reader := hookedReader(t, fx, h)

		fx.sale("a", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("h", "u1", it("a", 3))), nil, "Deduct h")
		h.between = func() {
			ctx := context.Background()
			if err := fx.s.Confirm(ctx, "h"); err != nil {
				t.Errorf("Confirm: %v", err)
			}
			if err := fx.s.RevertItems(ctx, stock.Return{OpID: "r1", OrderID: "h", Items: []stock.Item{{SKU: "a", Qty: 2}}}); err != nil {
				t.Errorf("RevertItems: %v", err)
			}
		}
		h.armed.Store(true)
		sn, err := reader.Snapshot(fx.ctx(), []redisstock.SnapshotRequest{{SKU: "a"}})
		if err != nil {
			t.Fatal(err)
		}
		if h.armed.Load() {
			t.Fatal("the step between the round trips did not run")
		}
		s := sn[0]
		var sum int64
		for _, hd := range s.Holds {
			sum += hd.Qty
		}
		if sum != s.Held || s.Available+s.Held+s.Sold != 10 || len(s.Lost) > 0 {
			t.Fatalf("Snapshot: available %d, held %d, sold %d, holds %+v (sum %d), lost %v; want the holds to add up to held, of one instant",
				s.Available, s.Held, s.Sold, s.Holds, sum, s.Lost)
		}
	})
}

// On a Cluster an order on two slots that took its first group and was
// refused on the second drops the first group's hold (its record
// deleted), and the order ID is free again: a new order under the ID may
// hold units of the same SKU before Snapshot reads the holds' records
// after its script. Snapshot reported the hold of the instant it read
// with the new order's quantity and user.
func TestSnapshotOfAHoldDroppedAndItsIDTakenAgainMeanwhile(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 1, 0, time.Minute)

		fx.loadScripts()
		ht := holdTake(fx.c, "x", 2) // x's second slot group, hi
		done := make(chan error, 1)
		go func() { done <- fx.s.Deduct(context.Background(), ord("x", "u1", it(lo, 3), it(hi, 2))) }()
		ht.heldNow(t)
		fx.want(lo, 7, 3, 0) // x holds 3 of lo, its take of hi waits

		var first, again error
		h := &betweenHook{cut: func(cmds []redis.Cmder) int {
			for _, c := range cmds {
				if c.Name() == "smismember" { // the pipeline of Snapshot's scripts
					return len(cmds)
				}
			}
			return -1
		}}
		h.between = func() {
			ht.let()
			first = <-done // hi sold out: the hold of lo dropped, x free
			again = fx.s.Deduct(context.Background(), ord("x", "u2", it(lo, 1)))
		}
		fx.c.AddHook(h) // on the Store's own client: its scripts are loaded
		h.armed.Store(true)
		sn, err := fx.s.Snapshot(fx.ctx(), []redisstock.SnapshotRequest{{SKU: lo}})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(first, stock.ErrSoldOut) {
			t.Fatalf("first Deduct of x: %v, want sold out", first)
		}
		is(t, again, nil, "Deduct of x again, other items")
		s := sn[0]
		var sum int64
		for _, hd := range s.Holds {
			sum += hd.Qty
		}
		if sum != s.Held || s.Available+s.Held != 10 || len(s.Lost) > 0 {
			t.Fatalf("Snapshot of %s: available %d, held %d, holds %+v (sum %d), lost %v; want the holds to add up to held, of one instant",
				lo, s.Available, s.Held, s.Holds, sum, s.Lost)
		}
	})
}
