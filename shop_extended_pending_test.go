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

// downRecord is the record, unreachable while down is set.
type downRecord struct {
	tiered.RecordStore
	down *atomic.Bool
}

func (r downRecord) Deduct(ctx context.Context, o stock.Order) error {
	if r.down.Load() {
		return errors.New("dial tcp 10.0.0.9:3306: connect: connection refused")
	}
	return r.RecordStore.Deduct(ctx, o)
}

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

// outageStep is one delivery of a message, and how the Consumer ended it.
type outageStep struct {
	m       handoff.Message
	attempt int
	retry   time.Duration
	ended   string
}

func (d *outageStep) Message() handoff.Message { return d.m }
func (d *outageStep) Attempt() int             { return d.attempt }
func (d *outageStep) Ack(context.Context) error {
	d.ended = "acked"
	return nil
}
func (d *outageStep) Retry(_ context.Context, delay time.Duration) error {
	d.ended, d.retry = "retried", delay
	return nil
}
func (d *outageStep) DeadLetter(context.Context, error) error {
	d.ended = "dead-lettered"
	return nil
}

// Through the Shop: a buyer told yes (Pending) asks for more time to pay
// (Shop.ExtendHold answers nil, the hold now ends at 40 minutes), then the
// record, or Redis (the gate, what the Shop degrades for), is unreachable
// for 15 minutes, less than the extended hold. handoff's doc: the Consumer
// retries "for as long as the gate still holds the order, so an outage
// shorter than the hold loses no order". The message keeps the Deadline of
// the hold before its extension (10 minutes): past it, the Shop's Consumer
// asks the gate, and retries the order while the gate holds it or cannot
// tell, rather than dead-letter it. Once the outage ends, the order is
// recorded and the buyer pays.
func TestShopRetriesAnExtendedPendingOrderThroughAnOutage(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(down *atomic.Bool) func(tiered.GateStore, tiered.RecordStore) (tiered.GateStore, tiered.RecordStore)
	}{
		{"record down", func(down *atomic.Bool) func(tiered.GateStore, tiered.RecordStore) (tiered.GateStore, tiered.RecordStore) {
			return func(g tiered.GateStore, r tiered.RecordStore) (tiered.GateStore, tiered.RecordStore) {
				return g, downRecord{RecordStore: r, down: down}
			}
		}},
		{"Redis down", func(down *atomic.Bool) func(tiered.GateStore, tiered.RecordStore) (tiered.GateStore, tiered.RecordStore) {
			return func(g tiered.GateStore, r tiered.RecordStore) (tiered.GateStore, tiered.RecordStore) {
				return downGate{GateStore: g, down: down}, r
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			clock := stocktest.NewClock(time.Now().Truncate(time.Millisecond))
			start := clock.Now()
			var down atomic.Bool
			shop, q := handoffShop(t, stockguard.Config{Clock: clock, Wrap: tc.wrap(&down)})
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
			last := &outageStep{m: m}
			for last.attempt < 400 && clock.Now().Before(start.Add(15*time.Minute)) {
				last = &outageStep{m: m, attempt: last.attempt + 1}
				c.Settle(ctx, []handoff.Delivery{last})
				if last.ended != "retried" {
					break
				}
				clock.Advance(last.retry)
			}
			if last.ended != "retried" {
				t.Fatalf("delivery %d %s at %v of a 15m outage (message Deadline %v after the order, gate hold extended to 40m; Done: %v); want it retried",
					last.attempt, last.ended, clock.Now().Sub(start), m.Deadline.Sub(start), done)
			}
			down.Store(false)
			clock.Advance(start.Add(20 * time.Minute).Sub(clock.Now())) // the outage is over; the buyer pays
			next := &outageStep{m: m, attempt: last.attempt + 1}
			c.Settle(ctx, []handoff.Delivery{next})
			if next.ended != "acked" || done != nil {
				t.Fatalf("delivery %d after the outage: %s, Done %v; want it recorded and acked", next.attempt, next.ended, done)
			}
			if err := shop.Confirm(ctx, "o1"); err != nil {
				t.Fatalf("Confirm at 20m = %v; want the order the buyer was told yes about paid", err)
			}
		})
	}
}
