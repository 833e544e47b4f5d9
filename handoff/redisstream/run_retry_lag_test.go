package redisstream_test

import (
	"context"
	"errors"
	"sync"
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

// countingSource closes emptyTwice once two of its Fetches returned
// nothing after the first one that returned a delivery.
type countingSource struct {
	handoff.Source
	mu         sync.Mutex
	delivered  bool
	empty      int
	emptyTwice chan struct{}
}

func (s *countingSource) Fetch(ctx context.Context, n int) ([]handoff.Delivery, error) {
	ds, err := s.Source.Fetch(ctx, n)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(ds) > 0:
		s.delivered = true
	case s.delivered && err == nil:
		if s.empty++; s.empty == 2 {
			close(s.emptyTwice)
		}
	}
	return ds, err
}

// The wiring the package docs give: the Consumer under Run, its Lag as
// RecorderConfig.Lag. While the record is down, a queued order waits out
// its Retry backoff in the delayed set, which Oldest leaves out, and
// Run's Fetches find nothing ready; the queue still holds the order
// (Queue.Len counts it), so the consumer's Lag keeps telling how far
// behind the hand-off is (an hour), and the Recorder keeps refusing new
// orders.
func TestRunKeepsTheLagOfAnOrderWaitingOutItsRetry(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: "retry-lag", Redelivery: time.Hour, Block: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(time.Now().UnixMilli())
	clock := stocktest.NewClock(now)
	old := handoff.Message{Order: stock.Order{ID: "old", Items: []stock.Item{{SKU: "a", Qty: 1}}},
		Sent: now.Add(-time.Hour), Deadline: now.Add(time.Minute)}
	if err := q.Publish(ctx, old); err != nil {
		t.Fatal(err)
	}
	src := &countingSource{Source: q.Source("c1"), emptyTwice: make(chan struct{})}
	c, err := handoff.NewConsumer(src, downRecord{}, handoff.ConsumerConfig{Clock: clock,
		Backoff: time.Minute, MaxBackoff: time.Minute, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	gate := memstock.New(clock)
	if err := gate.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	rec := handoff.NewRecorder(q, gate, handoff.RecorderConfig{Clock: clock, MaxLag: time.Second, Lag: c.Lag})

	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	defer func() { stop(); <-done }()

	select {
	case <-src.emptyTwice: // the order was retried, and Run found nothing ready twice
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not fetch again after the retry")
	}
	n, err := q.Len(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Queue.Len = %d, %v; want 1 (the order waits out its retry)", n, err)
	}
	err = rec.Admit(ctx, stock.Order{ID: "new", Items: []stock.Item{{SKU: "a", Qty: 1}}})
	if !errors.Is(err, handoff.ErrBacklog) {
		t.Fatalf("Admit with %d order queued for an hour behind a record that is down, MaxLag 1s = %v (Consumer.Lag %v, Recorder.Lag %v); want ErrBacklog",
			n, err, c.Lag(), rec.Lag(ctx))
	}
}
