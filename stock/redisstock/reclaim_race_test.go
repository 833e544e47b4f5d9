package redisstock_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A due hold that ends between a pass's peek and its script (here a Revert
// on another node) took part of the pass's budget but is not returned by
// it. The pass must peek again rather than report fewer than limit holds
// while more are due: stock/tiered stops asking once a pass reports fewer
// than it asked for, and reverts at the record each order whose lines the
// gate returned, so the rest of a multi-SKU order (its line on a SKU the
// pass never peeked) was left held at the gate, its order reported held
// by Orders, until the next pass.
func TestReclaimPeeksAgainWhenADueHoldEndsBeforeItsScript(t *testing.T) {
	m := miniredis.RunT(t)
	clock := stocktest.NewClock(stocktest.Epoch)
	prefix := uniquePrefix(t)
	h := &beforeScript{sha: redis.NewScript(lua.Script("stock_reclaim.lua")).Hash()}
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	c.AddHook(h)
	t.Cleanup(func() { c.Close() })
	other := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { other.Close() })
	s := newStore(t, c, redisstock.Config{Prefix: prefix, Clock: clock})
	s2 := newStore(t, other, redisstock.Config{Prefix: prefix, Clock: clock})
	ctx := context.Background()
	if err := s.LoadAllScripts(ctx); err != nil { // see fixture.loadScripts
		t.Fatal(err)
	}
	for _, sku := range []string{"a", "b"} {
		if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10, HoldTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Deduct(ctx, ord("o1", "u1", it("a", 1))); err != nil {
		t.Fatal(err)
	}
	if err := s.Deduct(ctx, ord("o2", "u2", it("a", 1), it("b", 1))); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	// The pass peeks a's two due holds (its whole budget), then o1 is
	// reverted before the script runs.
	h.fn = func() {
		if err := s2.Revert(ctx, "o1"); err != nil {
			t.Errorf("Revert o1: %v", err)
		}
	}
	got, err := s.ReclaimExpired(ctx, 2)
	if err != nil {
		t.Fatalf("ReclaimExpired: %v", err)
	}
	if h.fn != nil {
		t.Fatal("the reclaim script was never sent")
	}
	if len(got) != 2 {
		t.Errorf("ReclaimExpired(2) returned %v while o2's line of b was due", got)
	}
	for _, sku := range []string{"a", "b"} {
		lv, err := s.Levels(ctx, sku)
		if err != nil {
			t.Fatal(err)
		}
		if lv.Available != 10 || lv.Held != 0 {
			t.Errorf("%s: available %d held %d after the pass, want 10 and 0", sku, lv.Available, lv.Held)
		}
	}
	infos, err := s.Orders(ctx, []string{"o2"})
	if err != nil {
		t.Fatal(err)
	}
	if infos[0].State != stock.StateExpired {
		t.Errorf("o2 after the pass: %v, want expired", infos[0].State)
	}
}
