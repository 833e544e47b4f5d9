package rabbitmq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// downRecord is a record that cannot answer: every Settle fails with an
// infrastructure error.
type downRecord struct{}

func (downRecord) Settle(context.Context, stock.Order) error {
	return errors.New("record down: dial tcp 10.0.0.9:3306: connection refused")
}

// countingSource closes emptyTwo once two of its Fetches returned nothing
// after the first one that returned a delivery.
type countingSource struct {
	handoff.Source
	mu        sync.Mutex
	delivered bool
	empty     int
	emptyTwo  chan struct{}
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
			close(s.emptyTwo)
		}
	}
	return ds, err
}

// The Publisher is no OldestReader: the Recorder's backpressure is the
// consumers' Lag alone (package doc). While the record is down, the
// order the consumer retried waits out its backoff in the Source's hands
// (Source.Holding counts it), an hour behind, and Run's Fetches find
// nothing ready; the consumer's Lag keeps counting the order, and the
// Recorder keeps refusing new orders.
func TestRunKeepsTheLagOfAnOrderWaitingOutItsRetry(t *testing.T) {
	url := testdb.Need(t, broker)
	ctx := context.Background()
	cfg := config(t, url, time.Hour)
	pub := publisher(t, url, cfg)
	src := source(t, url, cfg)
	now := time.UnixMilli(time.Now().UnixMilli())
	clock := stocktest.NewClock(now)
	old := handoff.Message{Order: stock.Order{ID: "old", Items: []stock.Item{{SKU: "a", Qty: 1}}},
		Sent: now.Add(-time.Hour), Deadline: now.Add(time.Minute)}
	if err := pub.Publish(ctx, old); err != nil {
		t.Fatal(err)
	}
	cs := &countingSource{Source: src, emptyTwo: make(chan struct{})}
	c, err := handoff.NewConsumer(cs, downRecord{}, handoff.ConsumerConfig{Clock: clock,
		Backoff: time.Minute, MaxBackoff: time.Minute, Poll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	gate := memstock.New(clock)
	if err := gate.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	rec := handoff.NewRecorder(pub, gate, handoff.RecorderConfig{Clock: clock, MaxLag: time.Second, Lag: c.Lag})

	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	defer func() { stop(); <-done }()
	select {
	case <-cs.emptyTwo:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not fetch again after the retry")
	}
	if n := src.Holding(); n != 1 {
		t.Fatalf("Source.Holding = %d; want 1 (the order waits out its retry)", n)
	}
	err = rec.Admit(ctx, stock.Order{ID: "new", Items: []stock.Item{{SKU: "a", Qty: 1}}})
	if !errors.Is(err, handoff.ErrBacklog) {
		t.Fatalf("Admit with an order held for its retry an hour behind a record that is down, MaxLag 1s = %v (Consumer.Lag %v); want ErrBacklog",
			err, c.Lag())
	}
}
