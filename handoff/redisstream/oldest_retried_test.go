package redisstream_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/stock"
)

// retriedQueue returns a fresh queue on the shared Redis when
// STOCKGUARD_REDIS_ADDR is set (a stream of its own, deleted after the
// test), on a miniredis otherwise, and two messages published on it: a
// (sent 2s ago) before b (sent 1s ago).
func retriedQueue(t *testing.T) (*redisstream.Queue, handoff.Message, handoff.Message) {
	t.Helper()
	addr := os.Getenv("STOCKGUARD_REDIS_ADDR")
	if addr == "" {
		addr = miniredis.RunT(t).Addr()
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	name := fmt.Sprintf("stockguard-test-oldest-retried-%d", time.Now().UnixNano())
	q, err := redisstream.New(context.Background(), rdb, redisstream.Config{Stream: name, Redelivery: time.Minute, Block: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("redisstream.New: %v", err)
	}
	t.Cleanup(func() {
		stream, delayed, dead, retried := q.Keys()
		rdb.Del(context.Background(), stream, delayed, dead, retried)
	})
	now := time.UnixMilli(time.Now().UnixMilli())
	msg := func(id string, sent time.Time) handoff.Message {
		return handoff.Message{
			Order:    stock.Order{ID: id, Items: []stock.Item{{SKU: "sku-a", Qty: 1}}},
			Sent:     sent,
			Deadline: sent.Add(10 * time.Minute),
		}
	}
	a, b := msg("old-a", now.Add(-2*time.Second)), msg("new-b", now.Add(-time.Second))
	for _, m := range []handoff.Message{a, b} {
		if err := q.Publish(context.Background(), m); err != nil {
			t.Fatalf("Publish %s: %v", m.Order.ID, err)
		}
	}
	return q, a, b
}

// retryFirst fetches the first message (a, the head of the stream) and
// hands it back with Retry(0): not waiting out any delay, it is back in
// the queue at once.
func retryFirst(t *testing.T, q *redisstream.Queue, a handoff.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ds, err := q.Source("c1").Fetch(ctx, 1)
	if err != nil || len(ds) != 1 || ds[0].Message().Order.ID != a.Order.ID {
		t.Fatalf("Fetch = %d deliveries, %v; want %s alone", len(ds), err, a.Order.ID)
	}
	if err := ds[0].Retry(ctx, 0); err != nil {
		t.Fatalf("Retry(0): %v", err)
	}
}

// handoff/doc.go ("Writing an adapter"): "Oldest tells the Sent time of
// the oldest message not acknowledged or dead-lettered (one waiting out a
// Retry's delay may be left out)". redisstream's Oldest doc: "the first
// published of those not acknowledged or dead-lettered". A message
// retried with no delay is back in the queue, not acknowledged, and waits
// out no delay: it is the oldest.
func TestOldestCountsARetriedMessageBackInTheQueue(t *testing.T) {
	q, a, b := retriedQueue(t)
	retryFirst(t, q, a)
	if n, err := q.Len(context.Background()); err != nil || n != 2 {
		t.Fatalf("Len = %d, %v; want 2 (a and b not acknowledged)", n, err)
	}
	sent, ok, err := q.Oldest(context.Background())
	if err != nil || !ok || !sent.Equal(a.Sent) {
		t.Fatalf("Oldest = %v, %v, %v; want a's Sent %v (b's is %v): the retried message back in the queue is the oldest not acknowledged",
			sent.Format(time.StampMilli), ok, err, a.Sent.Format(time.StampMilli), b.Sent.Format(time.StampMilli))
	}
}

type holdGate struct{}

func (holdGate) Levels(context.Context, string) (stock.Levels, error) {
	return stock.Levels{HoldTTL: 10 * time.Minute}, nil
}

// handoff/doc.go ("Backpressure"): "while the hand-off lags more than a
// bound, new orders are refused before the gate holds anything"; the lag
// is "the age of the oldest message not acknowledged, from OldestReader".
// a, 2s old and not acknowledged, is past a 1.5s bound.
func TestRecorderRefusesWhileARetriedMessageLags(t *testing.T) {
	q, a, _ := retriedQueue(t)
	retryFirst(t, q, a)
	rec := handoff.NewRecorder(q, holdGate{}, handoff.RecorderConfig{MaxLag: 1500 * time.Millisecond})
	o := stock.Order{ID: "next", Items: []stock.Item{{SKU: "sku-a", Qty: 1}}}
	if err := rec.Admit(context.Background(), o); !errors.Is(err, handoff.ErrBacklog) {
		t.Fatalf("Admit = %v with lag %v; want ErrBacklog: a (sent %v ago) is not acknowledged",
			err, rec.Lag(context.Background()).Round(time.Millisecond), time.Since(a.Sent).Round(time.Millisecond))
	}
}

// The same with the Consumer's own kind of Retry, one with a delay: once
// the delay has passed, a Fetch moves a back onto the stream (behind b)
// and delivers b. a waits out no delay any more and is not acknowledged.
func TestOldestCountsARetriedMessageAfterItsDelay(t *testing.T) {
	q, a, b := retriedQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ds, err := q.Source("c1").Fetch(ctx, 1)
	if err != nil || len(ds) != 1 || ds[0].Message().Order.ID != a.Order.ID {
		t.Fatalf("Fetch = %d deliveries, %v; want %s alone", len(ds), err, a.Order.ID)
	}
	if err := ds[0].Retry(ctx, 50*time.Millisecond); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	time.Sleep(150 * time.Millisecond)
	ds, err = q.Source("c2").Fetch(ctx, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("second Fetch = %d deliveries, %v; want 1", len(ds), err)
	}
	sent, ok, err := q.Oldest(ctx)
	if err != nil || !ok || !sent.Equal(a.Sent) {
		t.Fatalf("Oldest = %v, %v, %v (second Fetch delivered %s); want a's Sent %v (b's is %v)",
			sent.Format(time.StampMilli), ok, err, ds[0].Message().Order.ID, a.Sent.Format(time.StampMilli), b.Sent.Format(time.StampMilli))
	}
}
