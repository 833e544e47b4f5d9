package redisstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/stock"
)

// A Fetch moves due retries back onto the stream before it reads, also
// on a queue whose every Fetch fills its batch with new messages: an
// order handed back for a Retry is delivered again once its delay has
// passed, however busy the queue.
func TestBusyQueueStillMovesDueRetriesBack(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	const redelivery = 40 * time.Millisecond
	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: "busy-sweep", Redelivery: redelivery, Block: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	msg := func(id string) handoff.Message {
		return handoff.Message{Order: stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}}, Sent: time.Now()}
	}
	if err := q.Publish(ctx, msg("old")); err != nil {
		t.Fatal(err)
	}
	src := q.Source("c1")
	ds, err := src.Fetch(ctx, 2)
	if err != nil || len(ds) != 1 {
		t.Fatalf("first Fetch: %d deliveries, %v", len(ds), err)
	}
	if err := ds[0].Retry(ctx, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// Ten Fetches of two new orders each, over more than 5*Redelivery.
	if !fetchBusy(t, q, src, 10, redelivery/2, "old") {
		n, _ := q.Len(ctx)
		t.Errorf("the order retried with a 1ms delay was not delivered in 10 Fetches over %v (Redelivery %v); Queue.Len %d", 10*redelivery/2, redelivery, n)
	}
}

// fetchBusy makes fetches Fetches of two from src, each after two new
// orders were published and pause passed, acknowledging what it gets, and
// reports whether one of them delivered the order want.
func fetchBusy(t *testing.T, q *redisstream.Queue, src handoff.Source, fetches int, pause time.Duration, want string) (seen bool) {
	t.Helper()
	ctx := context.Background()
	for i := range fetches {
		for j := range 2 {
			m := handoff.Message{Order: stock.Order{ID: fmt.Sprintf("n%d-%d", i, j), Items: []stock.Item{{SKU: "a", Qty: 1}}}, Sent: time.Now()}
			if err := q.Publish(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(pause)
		ds, err := src.Fetch(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			seen = seen || d.Message().Order.ID == want
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	return seen
}
