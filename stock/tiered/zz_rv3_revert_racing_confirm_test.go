package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// Manager.Revert: "So a Confirm, a repeat Deduct and Orders answer a
// reverted order stock.ErrOrderClosed, and an expired one
// stock.ErrHoldExpired, after the gate has forgotten it too"; doc.go: "a
// Confirm racing that Revert answers stock.ErrOrderClosed". A caller's
// Revert well before the deadline, with a Confirm of the same order (a
// second node) running between its gate step and its record step, is
// answered nil: the order is closed, and every look at it says so, before
// and after the Redis gate's Retention.
func TestRevertRacingConfirmStaysClosedAfterTheGateRetention(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	mr := miniredis.RunT(t)
	mr.SetTime(stocktest.Epoch)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	rg, err := redisstock.New(rdb, redisstock.Config{Clock: clock, Prefix: testdb.Unique("zrc"), Retention: redisstock.MinRetention})
	if err != nil {
		t.Fatal(err)
	}
	gate := stocktest.NewFaulty(rg)
	m := tiered.New(gate, memstock.New(clock), tiered.Config{Clock: clock})
	if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	reverted, fired := false, false
	var racing error
	gate.SetBefore(func(c stocktest.Call) {
		switch {
		case c.Method == "Revert" && c.OrderID == "o1":
			reverted = true
		case c.Method == "Orders" && reverted && !fired:
			fired = true
			racing = m.Confirm(ctx, "o1") // another node, between the Revert's tiers
		}
	})
	if err := m.Revert(ctx, "o1"); err != nil {
		t.Fatalf("Revert: %v", err)
	}
	gate.SetBefore(nil)
	if !fired {
		t.Fatal("no gate read after the gate's revert")
	}
	if !errors.Is(racing, stock.ErrOrderClosed) {
		t.Errorf("Confirm racing the Revert: %v, want %v", racing, stock.ErrOrderClosed)
	}
	check := func(stage string) {
		t.Helper()
		if err := m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrOrderClosed) {
			t.Errorf("%s: Confirm %v, want %v", stage, err, stock.ErrOrderClosed)
		}
		if err := m.Deduct(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrOrderClosed) {
			t.Errorf("%s: repeat Deduct %v, want %v", stage, err, stock.ErrOrderClosed)
		}
		in, err := m.Orders(ctx, []string{"o1"})
		if err != nil {
			t.Fatal(err)
		}
		if in[0].State != stock.StateReverted {
			t.Errorf("%s: Orders %s, want reverted", stage, in[0].State)
		}
	}
	check("right after")
	d := redisstock.MinRetention + time.Hour
	clock.Advance(d)
	mr.SetTime(clock.Now())
	mr.FastForward(d)
	if _, err := m.ReclaimExpired(ctx, 10); err != nil {
		t.Logf("ReclaimExpired: %v", err)
	}
	check("after the gate's Retention")
}
