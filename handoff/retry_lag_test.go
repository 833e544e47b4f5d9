package handoff_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// switchRecord fails every Settle while down is set (the record cannot
// answer), and records every order otherwise.
type switchRecord struct{ down atomic.Bool }

func (r *switchRecord) Settle(context.Context, stock.Order) error {
	if r.down.Load() {
		return errors.New("record down: dial tcp 10.0.0.9:3306: connection refused")
	}
	return nil
}

// A message the Consumer handed back for a Retry waits out its delay
// where no Fetch sees it: the Consumer counts its lag (growing with the
// clock) across Fetches that find nothing ready and across batches of
// other messages, until it is delivered to the consumer again; then it is
// the batch's, and it ends with the batch.
func TestConsumerLagCountsARetriedMessageUntilDeliveredAgain(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(t0)
	record := &switchRecord{}
	record.down.Store(true)
	c, err := handoff.NewConsumer(idleSource{}, record, handoff.ConsumerConfig{Clock: clock, Backoff: time.Hour, MaxBackoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	old := handoff.Message{Order: order("old", 1), Sent: t0.Add(-10 * time.Minute), Deadline: t0.Add(time.Hour)}
	first := &stepDelivery{m: old, attempt: 1}
	c.Settle(ctx, []handoff.Delivery{first})
	if first.ended != "retried" || first.retry != time.Hour {
		t.Fatalf("delivery during the outage %s after %v; want retried after 1h", first.ended, first.retry)
	}
	c.Settle(ctx, nil) // a Fetch with nothing ready
	clock.Advance(time.Minute)
	if lag := c.Lag(); lag != 11*time.Minute {
		t.Fatalf("Lag %v a minute after a Fetch found nothing ready, the 10m-old message waiting out its retry; want 11m", lag)
	}

	record.down.Store(false)
	fresh := &stepDelivery{m: handoff.Message{Order: order("fresh", 1), Sent: t0}, attempt: 1}
	c.Settle(ctx, []handoff.Delivery{fresh})
	c.Settle(ctx, nil)
	if lag := c.Lag(); fresh.ended != "acked" || lag != 11*time.Minute {
		t.Fatalf("after a batch of another message (%s) and an empty Fetch: Lag %v; want 11m, the retried message's", fresh.ended, lag)
	}

	again := &stepDelivery{m: old, attempt: 2}
	c.Settle(ctx, []handoff.Delivery{again})
	if lag := c.Lag(); again.ended != "acked" || lag != 11*time.Minute {
		t.Fatalf("after the retried message was delivered again (%s): Lag %v; want the 11m its batch ended with", again.ended, lag)
	}
	c.Settle(ctx, nil)
	if lag := c.Lag(); lag != 0 {
		t.Fatalf("Lag %v once the retried message was recorded and a Fetch found nothing; want 0", lag)
	}
}

// A message retried here and then taken by another consumer (which
// settles it) is no longer counted once its delay has passed: the first
// Fetch begun after that no longer counts it, found or not, so it cannot
// hold the lag up for ever.
func TestConsumerLagDropsARetriedMessageOnceItsDelayPassed(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(t0)
	record := &switchRecord{}
	record.down.Store(true)
	const delay = time.Millisecond // the broker's, waited out in real time
	c, err := handoff.NewConsumer(idleSource{}, record, handoff.ConsumerConfig{Clock: clock, Backoff: delay, MaxBackoff: delay})
	if err != nil {
		t.Fatal(err)
	}
	d := &stepDelivery{m: handoff.Message{Order: order("old", 1), Sent: t0.Add(-10 * time.Minute), Deadline: t0.Add(time.Hour)}, attempt: 1}
	c.Settle(ctx, []handoff.Delivery{d})
	if lag := c.Lag(); d.ended != "retried" || lag != 10*time.Minute {
		t.Fatalf("delivery %s; Lag %v just after its retry; want retried, 10m", d.ended, lag)
	}
	time.Sleep(delay) // the message is back in the queue, for any consumer
	c.Settle(ctx, nil)
	if lag := c.Lag(); lag != 0 {
		t.Fatalf("Lag %v after a Fetch begun once the retry's delay passed found nothing; want 0", lag)
	}
}

// idleSource never delivers: the tests drive Settle themselves.
type idleSource struct{}

func (idleSource) Fetch(ctx context.Context, _ int) ([]handoff.Delivery, error) { return nil, nil }

// scriptSource delivers d on its first Fetch, nothing on its second,
// and then tells the test on asked that Run fetches a third time,
// blocking that Fetch until ctx ends.
type scriptSource struct {
	d     handoff.Delivery
	calls int
	asked chan struct{}
}

func (s *scriptSource) Fetch(ctx context.Context, _ int) ([]handoff.Delivery, error) {
	s.calls++
	switch s.calls {
	case 1:
		return []handoff.Delivery{s.d}, nil
	case 2:
		return nil, nil
	case 3:
		close(s.asked)
	}
	<-ctx.Done()
	return nil, nil
}

// Under Run, a message retried and waiting out its delay is counted
// across a Fetch that found nothing ready; once Run has returned, the
// Consumer counts nothing (a consumer that stopped fetching does not hold
// the lag).
func TestRunCountsARetriedMessageUntilItReturns(t *testing.T) {
	clock := stocktest.NewClock(t0)
	record := &switchRecord{}
	record.down.Store(true)
	d := &stepDelivery{m: handoff.Message{Order: order("old", 1), Sent: t0.Add(-10 * time.Minute), Deadline: t0.Add(time.Hour)}, attempt: 1}
	src := &scriptSource{d: d, asked: make(chan struct{})}
	c, err := handoff.NewConsumer(src, record, handoff.ConsumerConfig{Clock: clock, Backoff: time.Hour, MaxBackoff: time.Hour, Poll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	<-src.asked // the retry, then a Fetch with nothing ready, are behind
	if lag := c.Lag(); d.ended != "retried" || lag != 10*time.Minute {
		stop()
		<-done
		t.Fatalf("delivery %s; Lag %v after a Fetch found nothing ready; want retried, 10m", d.ended, lag)
	}
	stop()
	<-done
	if lag := c.Lag(); lag != 0 {
		t.Fatalf("Lag %v once Run returned; want 0", lag)
	}
}
