package redisstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// downRecord is a record that cannot answer: every Settle fails with an
// infrastructure error.
type downRecord struct{}

func (downRecord) Settle(context.Context, stock.Order) error {
	return errors.New("record down: dial tcp 10.0.0.9:3306: connection refused")
}

// While the record is down, a queued order waits out the Consumer's Retry
// backoff in the adapter's delayed set, which the stream's Oldest does not
// see: the hand-off is still as far behind as that order, as its consumer
// tells, and the Recorder refuses new orders before the gate holds
// anything.
func TestRecorderRefusesWhileARetriedOrderWaits(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: "stalled-orders", Redelivery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(time.Now().UnixMilli())
	clock := stocktest.NewClock(now)
	old := handoff.Message{Order: stock.Order{ID: "stalled-old", Items: []stock.Item{{SKU: "a", Qty: 1}}},
		Sent: now.Add(-time.Hour), Deadline: now.Add(time.Minute)}
	if err := q.Publish(ctx, old); err != nil {
		t.Fatal(err)
	}
	c, err := handoff.NewConsumer(q.Source("c1"), downRecord{}, handoff.ConsumerConfig{Clock: clock, Backoff: time.Minute, MaxBackoff: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ds, err := q.Source("c1").Fetch(fctx, 8)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Fetch = %d, %v", len(ds), err)
	}
	c.Settle(ctx, ds) // the record is down: Retry after the backoff

	gate := memstock.New(clock)
	if err := gate.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	rec := handoff.NewRecorder(q, gate, handoff.RecorderConfig{Clock: clock, MaxLag: time.Second, Lag: c.Lag})
	n, _ := q.Len(ctx)
	err = rec.Admit(ctx, stock.Order{ID: "stalled-new", Items: []stock.Item{{SKU: "a", Qty: 1}}})
	if !errors.Is(err, handoff.ErrBacklog) {
		t.Fatalf("Admit with %d order(s) queued for an hour behind a record that is down, MaxLag 1s = %v (Recorder.Lag %v); want ErrBacklog", n, err, rec.Lag(ctx))
	}
}
