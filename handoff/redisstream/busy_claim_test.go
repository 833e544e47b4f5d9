package redisstream_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/stock"
)

// Fetch claims at least every Redelivery/2, busy or not: a delivery left
// unacknowledged by a consumer that stopped is claimed by another
// consumer whose Fetches all fill their batch with new messages, within a
// few Redelivery.
func TestBusyQueueClaimsAnAbandonedDelivery(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	busyQueueClaims(t, rdb, "busy-claim")
}

// The same on a Redis Cluster (STOCKGUARD_REDIS_CLUSTER).
func TestBusyQueueClaimsAnAbandonedDeliveryCluster(t *testing.T) {
	addrs := os.Getenv("STOCKGUARD_REDIS_CLUSTER")
	if addrs == "" {
		t.Skip("STOCKGUARD_REDIS_CLUSTER not set")
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	t.Cleanup(func() { _ = rdb.Close() })
	busyQueueClaims(t, rdb, fmt.Sprintf("busy-claim-%d", time.Now().UnixNano()))
}

func busyQueueClaims(t *testing.T, rdb redis.UniversalClient, stream string) {
	ctx := context.Background()
	const redelivery = 40 * time.Millisecond
	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: stream, Redelivery: redelivery, Block: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a, b, c, d := q.Keys()
		_ = rdb.Del(context.Background(), a, b, c, d).Err()
	})
	msg := func(id string) handoff.Message {
		return handoff.Message{Order: stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}}, Sent: time.Now()}
	}
	if err := q.Publish(ctx, msg("abandoned")); err != nil {
		t.Fatal(err)
	}
	ds, err := q.Source("crashed").Fetch(ctx, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("first Fetch: %d deliveries, %v", len(ds), err)
	}
	// The consumer "crashed" stops here: its delivery is never acknowledged.
	const fetches = 20 // over 10*Redelivery
	if !fetchBusy(t, q, q.Source("c2"), fetches, redelivery/2, "abandoned") {
		t.Errorf("the delivery abandoned by a stopped consumer was not claimed in %d full Fetches over %v (Redelivery %v)",
			fetches, fetches*redelivery/2, redelivery)
	}
}
