package redisstream_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/stock"
)

// CHANGELOG (v0.2.0, Fixed, redisstream Oldest): "a copy in the set that
// a v0.1.0 node settles (its Ack and DeadLetter do not know the set) ...
// is dropped from the set by the next Oldest, so the set never holds the
// lag of a settled message." doc.go: "Oldest first drops the members whose
// copy is gone ..., so the set cannot keep the lag of a settled message."
// Oldest's doc: "returns the Sent time of the oldest message not
// acknowledged or dead-lettered".
//
// During a rolling upgrade, 150 messages of an hour ago (a backlog after
// an outage) are retried by a node of this version and then acknowledged
// by a node still on v0.1.0. One fresh message is left. A Recorder with a 1.5s bound
// must admit the next order, and Oldest must answer the fresh message's
// Sent.
func TestOldestForgetsMoreThanAHundredCopiesAckedByAPreviousVersion(t *testing.T) {
	addr := os.Getenv("STOCKGUARD_REDIS_ADDR")
	if addr == "" {
		t.Skip("STOCKGUARD_REDIS_ADDR not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	name := fmt.Sprintf("stockguard-test-oldest-stale-%d", time.Now().UnixNano())
	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: name, Redelivery: time.Minute, Block: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stream, delayed, dead, retried := q.Keys()
	t.Cleanup(func() { rdb.Del(context.Background(), stream, delayed, dead, retried) })

	const backlog = 150
	hourAgo := time.UnixMilli(time.Now().Add(-time.Hour).UnixMilli())
	for i := range backlog {
		m := handoff.Message{Order: stock.Order{ID: fmt.Sprintf("old-%d", i), Items: []stock.Item{{SKU: "sku-a", Qty: 1}}},
			Sent: hourAgo.Add(time.Duration(i) * time.Millisecond), Deadline: hourAgo.Add(2 * time.Hour)}
		if err := q.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// A node of this version retries each: every copy is in the retried set.
	src := q.Source("new-node")
	for got := 0; got < backlog; {
		ds, err := src.Fetch(ctx, backlog-got)
		if err != nil {
			t.Fatalf("Fetch: %v", err)
		}
		for _, d := range ds {
			if err := d.Retry(ctx, 0); err != nil {
				t.Fatalf("Retry: %v", err)
			}
		}
		got += len(ds)
	}
	// A v0.1.0 node reads the copies and acknowledges each as v0.1.0's
	// delivery.Ack does (MULTI XACK + XDEL).
	for acked := 0; acked < backlog; {
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "stockguard", Consumer: "v010-node", Streams: []string{stream, ">"}, Count: backlog, Block: -1}).Result()
		if err != nil || len(res) != 1 {
			t.Fatalf("XREADGROUP = %v, %v", res, err)
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
		acked += len(res[0].Messages)
	}
	fresh := handoff.Message{Order: stock.Order{ID: "fresh", Items: []stock.Item{{SKU: "sku-a", Qty: 1}}},
		Sent: time.UnixMilli(time.Now().UnixMilli()), Deadline: time.Now().Add(time.Hour)}
	if err := q.Publish(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Len(ctx); err != nil || n != 1 {
		t.Fatalf("Len = %d, %v; want 1 (the fresh message alone)", n, err)
	}
	rec := handoff.NewRecorder(q, holdGate{}, handoff.RecorderConfig{MaxLag: 1500 * time.Millisecond})
	o := stock.Order{ID: "next", Items: []stock.Item{{SKU: "sku-a", Qty: 1}}}
	if err := rec.Admit(ctx, o); err != nil {
		t.Errorf("Admit = %v (lag %v) with one fresh message in the queue; want nil", err, rec.Lag(ctx).Round(time.Second))
	}
	sent, ok, err := q.Oldest(ctx)
	if err != nil || !ok || !sent.Equal(fresh.Sent) {
		t.Errorf("Oldest = %v, %v, %v; want the fresh message's Sent %v: the %d older messages are all acknowledged",
			sent.Format(time.StampMilli), ok, err, fresh.Sent.Format(time.StampMilli), backlog)
	}
}
