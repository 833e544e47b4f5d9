package redisstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// gapThenReclaim runs call between the bind and the take of a Deduct of 2
// units of "a" (held an hour) by order o1, then a reclaim pass two minutes
// later, then lets the take go: the Deduct must answer nil and hold.
func gapThenReclaim(t *testing.T, fx *fixture, call func() error, want error) {
	t.Helper()
	fx.sale("a", 10, 0, time.Hour)
	fx.loadScripts()
	h := holdTake(fx.c, "o1", 1)
	done := make(chan error, 1)
	go func() { done <- fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))) }()
	h.heldNow(t)
	if err := call(); !errors.Is(err, want) {
		t.Fatalf("call in the gap: %v, want %v", err, want)
	}
	fx.clock.Advance(2 * time.Minute)
	if _, err := fx.s.ReclaimExpired(fx.ctx(), 100); err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	h.let()
	is(t, <-done, nil, "Deduct whose take ran after the call and the reclaim pass")
	fx.want("a", 8, 2, 0)
}

// gapInGap is gapThenReclaim, after which the order must still have a
// live entry and be confirmable.
func gapInGap(t *testing.T, fx *fixture, call func() error, want error) {
	t.Helper()
	gapThenReclaim(t, fx, call, want)
	if _, ends, ok, err := fx.s.Entry(fx.ctx(), "o1"); err != nil || !ok || ends != 0 {
		t.Errorf("entry of the held order o1: ok %v, ends at %d (err %v); want live, no end", ok, ends, err)
	}
	is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm of the held order o1 before its deadline")
	fx.want("a", 8, 0, 2)
}

// A partial return that runs in the gap finds no line; as for Confirm, a
// reclaim pass a minute later must leave the bound entry to its take.
func TestGapRevertItemsThenReclaimKeepsTheBoundEntry(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		gapInGap(t, fx, func() error {
			return fx.s.RevertItems(fx.ctx(), stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{it("a", 1)}})
		}, stock.ErrUnknownOrder)
	})
}

// Unbatched on a Cluster (MaxBatch 1: bind, then the take on its own).
func TestGapUnbatchedConfirmThenReclaimKeepsTheBoundEntry(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, MaxBatch: 1})
		gapInGap(t, fx, func() error { return fx.s.Confirm(fx.ctx(), "o1") }, stock.ErrUnknownOrder)
	})
}

// On a Ring, which binds before it takes as a Cluster does.
func TestGapRingConfirmThenReclaimKeepsTheBoundEntry(t *testing.T) {
	fx := newRingFixture(t)
	gapInGap(t, fx, func() error { return fx.s.Confirm(fx.ctx(), "o1") }, stock.ErrUnknownOrder)
}

// newRingFixture is a fixture on a Ring of two miniredis servers, with the
// fault hook on its client.
func newRingFixture(t *testing.T) *fixture {
	a, b := miniredis.RunT(t), miniredis.RunT(t)
	c := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	t.Cleanup(func() { c.Close() })
	h := &faultHook{}
	c.AddHook(h)
	clock := stocktest.NewClock(stocktest.Epoch)
	cfg := redisstock.Config{Prefix: uniquePrefix(t), Clock: clock}
	return &fixture{t: t, s: newStore(t, c, cfg), c: c, clock: clock, hook: h, cfg: cfg}
}
