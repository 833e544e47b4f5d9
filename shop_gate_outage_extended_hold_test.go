package stockguard_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// downGate is the Redis gate, unreachable while down is set.
type downGate struct {
	tiered.GateStore
	down *atomic.Bool
}

var errRedisDown = errors.New("dial tcp 10.0.0.8:6379: connect: connection refused")

func (g downGate) Deduct(ctx context.Context, o stock.Order) error {
	if g.down.Load() {
		return errRedisDown
	}
	return g.GateStore.Deduct(ctx, o)
}

func (g downGate) Orders(ctx context.Context, ids []string) ([]stock.OrderInfo, error) {
	if g.down.Load() {
		return nil, errRedisDown
	}
	return g.GateStore.Orders(ctx, ids)
}

// README: "an outage shorter than the hold loses no order; past the
// deadline in the message, the gate is asked whether it still holds the
// order, a hold extended since". Here the outage is Redis's (the gate,
// which is what the Shop degrades for), 15 minutes, shorter than the
// extended hold (40 minutes): the Consumer, past the message's Deadline,
// cannot ask the gate and dead-letters an order the gate still holds.
func TestShopExtendedPendingOrderSurvivesARedisOutage(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(time.Now().Truncate(time.Millisecond))
	start := clock.Now()
	var down atomic.Bool
	shop, q := handoffShop(t, stockguard.Config{Clock: clock,
		Wrap: func(g tiered.GateStore, r tiered.RecordStore) (tiered.GateStore, tiered.RecordStore) {
			return downGate{GateStore: g, down: &down}, r
		}})
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 5, HoldTTL: 10 * time.Minute, MaxHoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if p, err := shop.Place(ctx, order("o1", 1)); err != nil || p != tiered.Pending {
		t.Fatalf("Place = %v, %v; want Pending", p, err)
	}
	if err := shop.ExtendHold(ctx, "o1", start.Add(40*time.Minute)); err != nil {
		t.Fatalf("ExtendHold = %v", err)
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	ds, err := q.Source("c0").Fetch(fctx, 1)
	cancel()
	if err != nil || len(ds) != 1 {
		t.Fatalf("Fetch = %d, %v", len(ds), err)
	}
	m := ds[0].Message()
	var done error
	c, err := shop.Consumer(q.Source("c1"), handoff.ConsumerConfig{
		Done: func(_ context.Context, _ handoff.Message, err error) { done = err }})
	if err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	var last *outageStep
	for attempt := 1; attempt <= 400 && clock.Now().Before(start.Add(15*time.Minute)); attempt++ {
		last = &outageStep{m: m, attempt: attempt}
		c.Settle(ctx, []handoff.Delivery{last})
		if last.ended != "retried" {
			break
		}
		clock.Advance(last.retry)
	}
	at := clock.Now().Sub(start)
	down.Store(false)
	clock.Advance(start.Add(20 * time.Minute).Sub(clock.Now()))
	gl, _ := shop.Gate().Orders(ctx, []string{"o1"})
	gateHolds := len(gl) == 1 && gl[0].State == stock.StateHeld
	if last.ended == "dead-lettered" {
		cerr := shop.Confirm(ctx, "o1")
		rl, _ := shop.Flow().Orders(ctx, []string{"o1"})
		t.Fatalf("delivery %d dead-lettered at %v during a 15m Redis outage (message Deadline %v, gate hold extended to 40m; at 20m the gate still holds it: %v; Done: %v); Confirm at 20m = %v, order then %+v; want it retried while the hold may still be held",
			last.attempt, at, m.Deadline.Sub(start), gateHolds, done, cerr, rl)
	}
}
