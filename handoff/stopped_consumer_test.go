package handoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// onceThenDown delivers what its Source has once, then fails every Fetch
// (its connection to the broker is gone), ending the run after a few
// failures.
type onceThenDown struct {
	handoff.Source
	fetched bool
	fails   int
	stop    context.CancelFunc
}

func (s *onceThenDown) Fetch(ctx context.Context, n int) ([]handoff.Delivery, error) {
	if !s.fetched {
		s.fetched = true
		return s.Source.Fetch(ctx, n)
	}
	if s.fails++; s.fails == 3 {
		s.stop()
	}
	return nil, errors.New("connection reset by peer")
}

// A Shop on a broker that does not tell its lag reads its consumers' Lag.
// A consumer that settled one late batch and then stopped fetching (its
// connection lost, then its Run ended) no longer counts: with the queue
// empty and another consumer idle on it, a new order is admitted.
func TestStoppedConsumerDoesNotKeepTheShopRefusing(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	mr := miniredis.RunT(t)
	rdb := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{mr.Addr()}}))
	t.Cleanup(func() { rdb.Close() })
	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: "stopped-orders", Redelivery: time.Hour, Block: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	shop, err := stockguard.New(rdb, testdb.SQLite(t, 4).DB, stockguard.Config{Clock: clock, Handoff: publisherOnly{q}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shop.Close)
	if err := shop.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 20, HoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	phone := func(id string) stock.Order { return stock.Order{ID: id, Items: []stock.Item{{SKU: "phone", Qty: 1}}} }
	if err := shop.Deduct(ctx, phone("o1")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(6 * time.Minute) // o1 waited 6m of its 10m hold

	runCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	src1 := &onceThenDown{Source: q.Source("c1"), stop: stop}
	c1, err := shop.Consumer(src1, handoff.ConsumerConfig{Poll: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := shop.Consumer(q.Source("c2"), handoff.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	_ = c1.Run(runCtx) // settles o1, then its Fetch fails until the run ends
	if in, err := shop.Record().Orders(ctx, []string{"o1"}); err != nil || len(in) != 1 {
		t.Fatalf("record has %v, %v; want o1 settled by c1", in, err)
	}
	fctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	ds, _ := q.Source("c2").Fetch(fctx, 8)
	c2.Settle(ctx, ds) // the other consumer finds the queue empty
	n, _ := q.Len(ctx)

	err = shop.Deduct(ctx, phone("o2"))
	if err != nil {
		t.Fatalf("Deduct with %d messages queued and a consumer idle on the queue = %v (consumer lags: c1 %v, c2 %v); want it admitted",
			n, err, c1.Lag(), c2.Lag())
	}
}

// lateThenFailing delivers one late message, then fails every Fetch and
// tells each failure on failed.
type lateThenFailing struct {
	q      *handofftest.Memory
	once   bool
	failed chan struct{}
}

func (s *lateThenFailing) Fetch(ctx context.Context, n int) ([]handoff.Delivery, error) {
	if !s.once {
		s.once = true
		return s.q.Source().Fetch(ctx, n)
	}
	select {
	case s.failed <- struct{}{}:
	case <-ctx.Done():
	}
	return nil, errors.New("connection reset by peer")
}

// A running consumer whose Fetch has failed for Poll since its last batch
// ended reports no lag: the lag that batch ended with is not held for as
// long as the broker cannot be reached.
func TestConsumerWhoseFetchKeepsFailingReportsNoLag(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(t0)
	q := handofftest.NewMemory(time.Hour)
	if err := q.Publish(ctx, handoff.Message{Order: order("o1", 1), Sent: t0.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	src := &lateThenFailing{q: q, failed: make(chan struct{})}
	flow := settlerFunc(func(context.Context, stock.Order) error { return nil })
	c, err := handoff.NewConsumer(src, flow, handoff.ConsumerConfig{Clock: clock, Poll: time.Second, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	<-src.failed // the batch ended; the first Fetch after it fails
	<-src.failed
	if lag := c.Lag(); lag != time.Minute {
		t.Fatalf("Lag %v just after the late batch, want the 1m it ended with", lag)
	}
	clock.Advance(time.Second) // failing for Poll
	<-src.failed
	<-src.failed // that failure has been counted
	if lag := c.Lag(); lag != 0 {
		t.Fatalf("Lag %v with Fetch failing for Poll since the batch ended, want 0", lag)
	}
}
