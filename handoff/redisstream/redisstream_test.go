package redisstream_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/stock"
)

var queues atomic.Int64

// harness runs the suite on fresh queues of rdb, each a stream of its own
// deleted after its subtest.
func harness(rdb redis.UniversalClient) handofftest.Harness {
	const redelivery = 300 * time.Millisecond
	return handofftest.Harness{
		Redelivery: redelivery,
		New: func(t *testing.T) handofftest.Queue {
			name := fmt.Sprintf("stockguard-test-handoff-%d-%d", time.Now().UnixNano(), queues.Add(1))
			q, err := redisstream.New(context.Background(), rdb, redisstream.Config{Stream: name, Redelivery: redelivery, Block: 50 * time.Millisecond})
			if err != nil {
				t.Fatalf("redisstream.New: %v", err)
			}
			t.Cleanup(func() {
				stream, delayed, dead, retried := q.Keys()
				for _, k := range []string{stream, delayed, dead, retried} {
					rdb.Del(context.Background(), k)
				}
			})
			var consumers atomic.Int64
			return handofftest.Queue{
				Publisher: q,
				NewSource: func() handoff.Source { return q.Source(fmt.Sprintf("c%d", consumers.Add(1))) },
				DeadLetters: func(ctx context.Context) ([]handofftest.DeadLetter, error) {
					ds, err := q.DeadLetters(ctx, "", 1000)
					out := make([]handofftest.DeadLetter, len(ds))
					for i, d := range ds {
						out[i] = handofftest.DeadLetter{Message: d.Message, Reason: d.Reason}
					}
					return out, err
				},
			}
		},
	}
}

func TestMiniredis(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	handofftest.Run(t, harness(rdb))
}

func TestRedis(t *testing.T) {
	addr := os.Getenv("STOCKGUARD_REDIS_ADDR")
	if addr == "" {
		t.Skip("STOCKGUARD_REDIS_ADDR not set")
	}
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	handofftest.Run(t, harness(rdb))
}

func TestRedisCluster(t *testing.T) {
	addrs := os.Getenv("STOCKGUARD_REDIS_CLUSTER")
	if addrs == "" {
		t.Skip("STOCKGUARD_REDIS_CLUSTER not set")
	}
	t.Parallel()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	t.Cleanup(func() { _ = rdb.Close() })
	handofftest.Run(t, harness(rdb))
}

// Len counts the messages published and not yet acknowledged or
// dead-lettered, those waiting out a Retry's delay included.
func TestLen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: "len"})
	if err != nil {
		t.Fatal(err)
	}
	want := func(n int64) {
		t.Helper()
		if got, err := q.Len(ctx); err != nil || got != n {
			t.Fatalf("Len = %d, %v; want %d", got, err, n)
		}
	}
	want(0)
	for _, id := range []string{"o1", "o2", "o3"} {
		if err := q.Publish(ctx, handoff.Message{Order: stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	want(3)
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ds, err := q.Source("c").Fetch(fctx, 3)
	if err != nil || len(ds) != 3 {
		t.Fatalf("Fetch = %d, %v", len(ds), err)
	}
	want(3) // read, not acknowledged
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ds[1].Retry(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	want(2)
	if err := ds[2].DeadLetter(ctx, errors.New("bad")); err != nil {
		t.Fatal(err)
	}
	want(1)
}

// Oldest dates a head entry whose payload does not decode by its entry
// ID, the time Redis added it, rather than call the queue empty.
func TestOldestOfAnUndecodablePayload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: "garbled"})
	if err != nil {
		t.Fatal(err)
	}
	stream, _, _, _ := q.Keys()
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: "1700000000123-0", Values: []any{"m", "not json"}}).Err(); err != nil {
		t.Fatal(err)
	}
	got, ok, err := q.Oldest(ctx)
	if err != nil || !ok || got.UnixMilli() != 1700000000123 {
		t.Fatalf("Oldest = %v, %v, %v; want the entry ID's time", got, ok, err)
	}
}
