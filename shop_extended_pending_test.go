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
// (Shop.ExtendHold answers nil), then the record is unreachable for 15
// minutes, less than the extended hold. handoff's doc: the Consumer
// retries "for as long as the gate still holds the order, so an outage
// shorter than the hold loses no order". The message keeps the Deadline
// of the hold before its extension (10 minutes); the Shop's Consumer asks
// the gate past it and retries the order, which the gate holds until 40,
// rather than dead-letter it.
func TestShopRetriesAnExtendedPendingOrderThroughARecordOutage(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(time.Now().Truncate(time.Millisecond))
	start := clock.Now()
	var down atomic.Bool
	shop, q := handoffShop(t, stockguard.Config{Clock: clock,
		Wrap: func(g tiered.GateStore, r tiered.RecordStore) (tiered.GateStore, tiered.RecordStore) {
			return g, downRecord{RecordStore: r, down: &down}
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
	clock.Advance(start.Add(20 * time.Minute).Sub(clock.Now())) // record back; buyer pays
	gl, _ := shop.Gate().Orders(ctx, []string{"o1"})
	gateHolds := len(gl) == 1 && gl[0].State == stock.StateHeld
	if last.ended == "dead-lettered" {
		cerr := shop.Confirm(ctx, "o1")
		t.Fatalf("delivery %d dead-lettered at %v (message Deadline %v after the order, gate hold extended to 40m; at 20m the gate still holds it: %v; Done: %v); Confirm at 20m = %v; want the order retried until the record is back, then recorded and confirmed",
			last.attempt, at, m.Deadline.Sub(start), gateHolds, done, cerr)
	}
}
