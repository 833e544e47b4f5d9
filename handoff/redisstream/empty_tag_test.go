package redisstream_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/stock"
)

// Config.Stream promises that a name without a hash tag gets one, so that
// the stream, its delayed set and its dead-letter stream share a Cluster
// slot. A name whose first braces are empty ("{}") has no hash tag for
// Redis Cluster (the whole key is hashed, later braces or not), so the
// Queue wraps it too: Fetch, Retry and Len work on a Cluster as they do
// on one server. A name without a tag that begins with '}' would get an
// empty one ("{}..."): it is refused before any key is written.
func TestStreamNameWithEmptyBracesOnCluster(t *testing.T) {
	addrs := os.Getenv("STOCKGUARD_REDIS_CLUSTER")
	if addrs == "" {
		t.Skip("STOCKGUARD_REDIS_CLUSTER not set")
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, format := range []string{"orders{}-%d", "{}{orders}-%d", "orders}{-%d"} {
		name := fmt.Sprintf(format, time.Now().UnixNano())
		t.Run(name, func(t *testing.T) { checkOneSlot(t, rdb, name) })
	}
	name := fmt.Sprintf("}orders{-%d", time.Now().UnixNano())
	if _, err := redisstream.New(context.Background(), rdb, redisstream.Config{Stream: name}); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("New(%q) = %v; want stock.ErrInvalid", name, err)
	}
	if n, err := rdb.Exists(context.Background(), "{"+name+"}").Result(); err != nil || n != 0 {
		t.Errorf("stream of the refused name: %d, %v; want none", n, err)
	}
}

// checkOneSlot publishes, fetches, retries and counts a message on the
// queue named name.
func checkOneSlot(t *testing.T, rdb *redis.ClusterClient, name string) {
	ctx := context.Background()
	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: name, Redelivery: time.Hour, Block: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stream, delayed, dead, retried := q.Keys()
	t.Cleanup(func() {
		for _, k := range []string{stream, delayed, dead, retried} {
			rdb.Del(context.Background(), k)
		}
	})
	m := handoff.Message{Order: stock.Order{ID: "empty-tag", Items: []stock.Item{{SKU: "a", Qty: 1}}}, Sent: time.UnixMilli(time.Now().UnixMilli())}
	if err := q.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	src := q.Source("c1")
	ds, err := src.Fetch(fctx, 8)
	if len(ds) != 1 {
		t.Fatalf("Fetch = %d deliveries, %v; want 1, nil", len(ds), err)
	}
	if err != nil {
		t.Errorf("Fetch = 1 delivery, %v; want nil error", err)
	}
	if err := ds[0].Retry(ctx, time.Hour); err != nil {
		t.Errorf("Retry of the delivery = %v; want nil (keys %q, %q, %q)", err, stream, delayed, dead)
	}
	if n, err := q.Len(ctx); err != nil || n != 1 {
		t.Errorf("Len = %d, %v; want 1, nil", n, err)
	}
	sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer scancel()
	if _, err := src.Fetch(sctx, 8); err != nil {
		t.Errorf("second Fetch = %v; want nil", err)
	}
}
