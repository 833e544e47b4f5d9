package redisstream_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/stock"
)

// CHANGELOG (v0.2.0, Fixed, redisstream Oldest): "No migration: a copy
// retried before the upgrade is not in the set, and Oldest leaves it out
// until it is settled, as before." handoff/doc.go: "Oldest tells the Sent
// time of the oldest message not acknowledged or dead-lettered ... false
// when there is none"; the Recorder refuses orders while that lag exceeds
// MaxLag.
//
// During a rolling upgrade a node of this version retries a message (its
// copy goes into the retried set) and a node still on v0.1.0 takes the
// copy and acknowledges it with v0.1.0's Ack (MULTI XACK + XDEL, nothing
// else), which leaves the retried set as it is. The queue is then empty:
// Oldest answers false, and a Recorder admits the next order.
func TestOldestForgetsACopyAckedByAPreviousVersion(t *testing.T) {
	addr := os.Getenv("STOCKGUARD_REDIS_ADDR")
	if addr == "" {
		t.Skip("STOCKGUARD_REDIS_ADDR not set")
	}
	q, a, _ := retriedQueue(t)
	retryFirst(t, q, a) // a node of this version: a's copy is in the retried set

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	stream, _, _, _ := q.Keys()
	// A v0.1.0 node reads what is left (b and a's copy) and acknowledges
	// each as v0.1.0's delivery.Ack does.
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "stockguard", Consumer: "v010-node", Streams: []string{stream, ">"}, Count: 10, Block: -1}).Result()
	if err != nil || len(res) != 1 || len(res[0].Messages) != 2 {
		t.Fatalf("XREADGROUP = %v, %v; want b and a's copy", res, err)
	}
	for _, x := range res[0].Messages {
		if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.XAck(ctx, stream, "stockguard", x.ID)
			p.XDel(ctx, stream, x.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := q.Len(ctx); err != nil || n != 0 {
		t.Fatalf("Len = %d, %v; want 0 (both acknowledged)", n, err)
	}
	sent, ok, err := q.Oldest(ctx)
	if err != nil || ok {
		t.Errorf("Oldest = %v, %v, %v on an empty queue; want false (every message acknowledged)", sent.Format(time.StampMilli), ok, err)
	}
	rec := handoff.NewRecorder(q, holdGate{}, handoff.RecorderConfig{MaxLag: 1500 * time.Millisecond})
	o := stock.Order{ID: "next", Items: []stock.Item{{SKU: "sku-a", Qty: 1}}}
	if err := rec.Admit(ctx, o); err != nil {
		t.Errorf("Admit = %v with the queue empty (lag %v); want nil", err, rec.Lag(ctx).Round(time.Millisecond))
	}
}
