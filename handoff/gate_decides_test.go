package handoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// downSettler is a flow whose record is down: every Settle fails for an
// infrastructure reason.
type downSettler struct{}

func (downSettler) Settle(context.Context, stock.Order) error {
	return errors.New("dial tcp 10.0.0.9:3306: connect: connection refused")
}

// holdingSettler is downSettler with a HoldReader that answers until, or
// err.
type holdingSettler struct {
	downSettler
	until time.Time
	err   error
	reads int
}

func (s *holdingSettler) HeldUntil(context.Context, string) (time.Time, error) {
	s.reads++
	return s.until, s.err
}

// Past a message's Deadline and MaxAttempts, the gate decides: an order
// it still holds is retried before its hold ends (and not more often
// than the backoff), one it no longer holds is dead-lettered, one it
// cannot tell about is retried until stock.MaxHoldTTL after the message
// was Sent (the longest a hold can last), and a Settler that is no
// HoldReader leaves the Deadline alone to decide. The gate is asked on that path only.
func TestPastItsDeadlineTheGateDecidesWhetherAMessageIsRetried(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(t0.Add(time.Minute))
	m := handoff.Message{Order: order("o1", 1), Sent: t0.Add(-10 * time.Minute), Deadline: t0}
	settle := func(flow handoff.Settler, attempt int) *stepDelivery {
		t.Helper()
		c, err := handoff.NewConsumer(handofftest.NewMemory(time.Hour).Source(), flow, handoff.ConsumerConfig{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		d := &stepDelivery{m: m, attempt: attempt}
		c.Settle(ctx, []handoff.Delivery{d})
		return d
	}
	held := &holdingSettler{until: clock.Now().Add(time.Second)}
	if d := settle(held, 9); d.ended != "retried" || held.reads != 0 {
		t.Fatalf("attempt 9: %s, %d gate reads; want retried without asking the gate", d.ended, held.reads)
	}
	if d := settle(held, 10); d.ended != "retried" || d.retry != time.Second || held.reads != 1 {
		t.Fatalf("attempt 10, gate holds it 1s more: %s after %v, %d gate reads; want retried after 1s (before the hold ends), one read", d.ended, d.retry, held.reads)
	}
	long := &holdingSettler{until: clock.Now().Add(time.Hour)}
	if d := settle(long, 10); d.ended != "retried" || d.retry != 5*time.Second {
		t.Fatalf("attempt 10, gate holds it an hour more: %s after %v; want retried after the 5s backoff", d.ended, d.retry)
	}
	for _, s := range []*holdingSettler{
		{until: time.Time{}}, // the gate does not hold it
		{until: clock.Now()}, // its hold ends now
	} {
		if d := settle(s, 10); d.ended != "dead-lettered" {
			t.Fatalf("attempt 10, gate answers %v, %v: %s; want dead-lettered", s.until, s.err, d.ended)
		}
	}
	if d := settle(downSettler{}, 10); d.ended != "dead-lettered" {
		t.Fatalf("attempt 10, a Settler that is no HoldReader: %s; want dead-lettered by the Deadline", d.ended)
	}
	// A gate that cannot tell (an outage): retried, until the longest a
	// hold can last has passed since the message was Sent.
	blind := &holdingSettler{err: errors.New("timeout")}
	if d := settle(blind, 10); d.ended != "retried" || d.retry != 5*time.Second {
		t.Fatalf("attempt 10, the gate cannot tell: %s after %v; want retried after the 5s backoff", d.ended, d.retry)
	}
	clock.Advance(m.Sent.Add(stock.MaxHoldTTL).Sub(clock.Now()) - time.Millisecond)
	if d := settle(blind, 10); d.ended != "retried" {
		t.Fatalf("attempt 10, the gate cannot tell, just within stock.MaxHoldTTL of Sent: %s; want retried", d.ended)
	}
	clock.Advance(time.Millisecond)
	if d := settle(blind, 10); d.ended != "dead-lettered" {
		t.Fatalf("attempt 10, the gate cannot tell, stock.MaxHoldTTL after Sent: %s; want dead-lettered", d.ended)
	}
}
