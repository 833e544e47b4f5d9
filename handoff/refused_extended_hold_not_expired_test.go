package handoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// refusingSettler: the record refuses the order for good (sold out
// there), while the gate holds it, its hold extended past the message's
// Deadline.
type refusingSettler struct{ until time.Time }

func (refusingSettler) Settle(context.Context, stock.Order) error { return stock.ErrSoldOut }
func (s refusingSettler) HeldUntil(context.Context, string) (time.Time, error) {
	return s.until, nil
}

// observe.Handoff.Expired: "the message was delivered after its gate
// hold's deadline: its order expired in the queue ... A message delivered
// after the deadline it was published with and recorded all the same
// (its hold was extended since) is not expired." An extended hold
// delivered after its published Deadline but before the gate's (extended)
// deadline did not expire in the queue, whatever the record answers; the
// Consumer counts it expired because Settle did not answer nil.
func TestExtendedHoldRefusedByTheRecordIsNotExpired(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(t0.Add(time.Minute))
	m := handoff.Message{Order: order("o1", 1), Sent: t0.Add(-10 * time.Minute), Deadline: t0}
	var seen []observe.Handoff
	flow := refusingSettler{until: t0.Add(30 * time.Minute)}
	c, err := handoff.NewConsumer(handofftest.NewMemory(time.Hour).Source(), flow, handoff.ConsumerConfig{Clock: clock,
		Observer: observe.Observer{Handoff: func(_ context.Context, h observe.Handoff) { seen = append(seen, h) }}})
	if err != nil {
		t.Fatal(err)
	}
	d := &stepDelivery{m: m, attempt: 1}
	c.Settle(ctx, []handoff.Delivery{d})
	if len(seen) != 1 || seen[0].Expired {
		t.Fatalf("reported %+v (ended %s); want one report, not Expired: the gate holds the order until %v, after the delivery at %v",
			seen, d.ended, flow.until, clock.Now())
	}
}
