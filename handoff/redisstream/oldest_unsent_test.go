package redisstream_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/stock"
)

// redisstream's Oldest doc: a payload that "has no Sent" is dated by the
// time Redis added the message. A message published without Sent and
// retried twice (each Retry a copy at the stream's end, a new entry) is
// still the message Redis added first: Oldest dates it by its first
// entry, not by a copy's.
func TestOldestDatesAMessageWithoutSentByItsFirstEntry(t *testing.T) {
	addr := os.Getenv("STOCKGUARD_REDIS_ADDR")
	if addr == "" {
		addr = miniredis.RunT(t).Addr()
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: fmt.Sprintf("stockguard-test-unsent-%d", time.Now().UnixNano()), Redelivery: time.Minute, Block: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("redisstream.New: %v", err)
	}
	stream, delayed, dead, retried := q.Keys()
	t.Cleanup(func() { rdb.Del(context.Background(), stream, delayed, dead, retried) })
	m := handoff.Message{Order: stock.Order{ID: "unsent", Items: []stock.Item{{SKU: "sku-a", Qty: 1}}}, Deadline: time.Now().Add(time.Minute)}
	if err := q.Publish(ctx, m); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	first, err := rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil || len(first) != 1 {
		t.Fatalf("XRANGE = %v, %v; want the one message", first, err)
	}
	ms, _, _ := strings.Cut(first[0].ID, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	added := time.UnixMilli(n)
	src := q.Source("c1")
	for i := 0; i < 2; i++ {
		time.Sleep(30 * time.Millisecond) // each copy is added at a later millisecond
		ds, err := src.Fetch(ctx, 1)
		if err != nil || len(ds) != 1 {
			t.Fatalf("Fetch %d = %d deliveries, %v; want 1", i+1, len(ds), err)
		}
		if err := ds[0].Retry(ctx, 0); err != nil {
			t.Fatalf("Retry %d: %v", i+1, err)
		}
	}
	sent, ok, err := q.Oldest(ctx)
	if err != nil || !ok || !sent.Equal(added) {
		t.Fatalf("Oldest = %v, %v, %v; want %v, the time Redis added the message", sent.Format(time.StampMilli), ok, err, added.Format(time.StampMilli))
	}
}
