package redisstream_test

import (
	"context"
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
	seen := false
	for i := range 10 {
		for j := range 2 {
			if err := q.Publish(ctx, msg(string(rune('a'+i))+string(rune('0'+j)))); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(redelivery / 2)
		ds, err := src.Fetch(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Message().Order.ID == "old" {
				seen = true
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !seen {
		n, _ := q.Len(ctx)
		t.Errorf("the order retried with a 1ms delay was not delivered in 10 Fetches over %v (Redelivery %v); Queue.Len %d", 10*redelivery/2, redelivery, n)
	}
}
