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

// oneDown is a record that cannot answer for the order ID down, and
// records every other order.
type oneDown struct{ down string }

func (r oneDown) Settle(_ context.Context, o stock.Order) error {
	if o.ID == r.down {
		return errors.New("record: dial tcp 10.0.0.9:3306: i/o timeout")
	}
	return nil
}

// A message the Consumer handed back for a Retry is counted by it until
// "the first Fetch begun once its delay has passed (by then it is back in
// the queue, and the consumer that takes it counts it)": a Fetch moves due
// retries back onto the stream before it reads, also on a busy queue
// whose Fetches fill their batch with new messages, so the order waits on
// the stream, where the queue's oldest message counts it, and the
// Recorder turns new orders away while it waits.
func TestLagOfARetriedOrderOnABusyQueue(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: "busy-retry-lag", Redelivery: time.Hour, Block: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(time.Now().UnixMilli())
	clock := stocktest.NewClock(now)
	msg := func(id string, sent time.Time) handoff.Message {
		return handoff.Message{Order: stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}},
			Sent: sent, Deadline: now.Add(time.Minute)}
	}
	if err := q.Publish(ctx, msg("old", now.Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	const delay = 20 * time.Millisecond
	src := q.Source("c1")
	c, err := handoff.NewConsumer(src, oneDown{down: "old"}, handoff.ConsumerConfig{Clock: clock, Batch: 2,
		Backoff: delay, MaxBackoff: delay, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	gate := memstock.New(clock)
	if err := gate.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	rec := handoff.NewRecorder(q, gate, handoff.RecorderConfig{Clock: clock, MaxLag: time.Second, Lag: c.Lag})

	ds, err := src.Fetch(ctx, 2)
	if err != nil || len(ds) != 1 {
		t.Fatalf("first Fetch: %d deliveries, %v; want the old order", len(ds), err)
	}
	c.Settle(ctx, ds) // the record is down for it: retried after 20ms
	if lag := c.Lag(); lag != time.Hour {
		t.Fatalf("Lag after the retry: %v, want 1h", lag)
	}

	// The queue is busy: new orders fill the next batch.
	for _, id := range []string{"n1", "n2"} {
		if err := q.Publish(ctx, msg(id, now)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * delay) // the retry's delay passes
	ds, err = src.Fetch(ctx, 2)
	if err != nil || len(ds) != 2 {
		t.Fatalf("busy Fetch: %d deliveries, %v; want the 2 new orders", len(ds), err)
	}
	c.Settle(ctx, ds)

	n, err := q.Len(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Queue.Len = %d, %v; want 1 (the old order, not recorded)", n, err)
	}
	if lag := rec.Lag(ctx); lag < time.Hour {
		t.Errorf("Recorder.Lag %v while the hour-old order is still queued; want at least 1h", lag)
	}
	if err := rec.Admit(ctx, stock.Order{ID: "new", Items: []stock.Item{{SKU: "a", Qty: 1}}}); !errors.Is(err, handoff.ErrBacklog) {
		t.Errorf("Admit with an order queued for an hour, MaxLag 1s: %v (Recorder.Lag %v); want ErrBacklog", err, rec.Lag(ctx))
	}
}
