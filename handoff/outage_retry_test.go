package handoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// outageRecord is a record that cannot be reached until its clock passes
// back (a database failover).
type outageRecord struct {
	*memstock.Store
	clock *stocktest.Clock
	back  time.Time
}

func (r *outageRecord) Deduct(ctx context.Context, o stock.Order) error {
	if r.clock.Now().Before(r.back) {
		return errors.New("dial tcp 10.0.0.9:3306: connect: connection refused")
	}
	return r.Store.Deduct(ctx, o)
}

// stepDelivery is one delivery of a message whose outcome the test reads:
// the broker's side of a Retry is played by the test, on its clock.
type stepDelivery struct {
	m       handoff.Message
	attempt int
	retry   time.Duration
	ended   string
}

func (d *stepDelivery) Message() handoff.Message { return d.m }
func (d *stepDelivery) Attempt() int             { return d.attempt }
func (d *stepDelivery) Ack(context.Context) error {
	d.ended = "acked"
	return nil
}
func (d *stepDelivery) Retry(_ context.Context, delay time.Duration) error {
	d.ended, d.retry = "retried", delay
	return nil
}
func (d *stepDelivery) DeadLetter(context.Context, error) error {
	d.ended = "dead-lettered"
	return nil
}

// An order the buyer was told yes meets a record that is unreachable for
// 20s, well within its 10 minute hold: the Consumer retries it past
// MaxAttempts while its Deadline has not passed, and records and
// acknowledges it once the record is back. So too when the Recorder's
// first read of the order's hold time failed (a Redis blip): it reads it
// again and publishes the message with the gate's Deadline.
func TestConsumerRetriesAnOutageUntilTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold func(gate *memstock.Store) handoff.LevelsReader
	}{
		{"hold time read", func(gate *memstock.Store) handoff.LevelsReader { return gate }},
		{"first read of the hold time failed", func(gate *memstock.Store) handoff.LevelsReader {
			return &blinkingLevels{Store: gate, fails: 1}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clock := stocktest.NewClock(t0)
			q := handofftest.NewMemory(time.Hour)
			gate := memstock.New(clock)
			record := &outageRecord{Store: memstock.New(clock), clock: clock, back: t0.Add(20 * time.Second)}
			rec := handoff.NewRecorder(q, tc.hold(gate), handoff.RecorderConfig{Clock: clock})
			flow := tiered.New(gate, record, tiered.Config{Recorder: rec, Clock: clock, RecheckAfter: -1})
			if err := flow.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: 10 * time.Minute}); err != nil {
				t.Fatal(err)
			}
			p, err := flow.Place(ctx, order("o1", 1))
			if err != nil || p != tiered.Pending {
				t.Fatalf("Place = %v, %v; want Pending (told yes)", p, err)
			}
			ds := fetch(t, q.Source(), 1)
			m := ds[0].Message()
			if want := t0.Add(10 * time.Minute); !m.Deadline.Equal(want) {
				t.Fatalf("message Deadline %v, want the gate's %v", m.Deadline, want)
			}
			var dead error
			c, err := handoff.NewConsumer(q.Source(), flow, handoff.ConsumerConfig{Clock: clock,
				Done: func(_ context.Context, _ handoff.Message, err error) { dead = err }})
			if err != nil {
				t.Fatal(err)
			}
			last := retryUntilEnded(ctx, c, m, clock, 100)
			in, _ := record.Orders(ctx, []string{"o1"})
			recorded := len(in) == 1 && in[0].State == stock.StateHeld
			if last.ended != "acked" || !recorded {
				t.Fatalf("after a 20s record outage (order sent at %v, deadline %v, now %v): delivery %d %s (%v), recorded at the record: %v; want it retried until the record is back, then recorded and acked",
					m.Sent.Format(time.TimeOnly), m.Deadline.Format(time.TimeOnly), clock.Now().Format(time.TimeOnly), last.attempt, last.ended, dead, recorded)
			}
		})
	}
}

// retryUntilEnded delivers m to c again and again, as its broker would
// after each Retry on the test's clock, until c ends a delivery otherwise
// or max deliveries were made; it returns the last one.
func retryUntilEnded(ctx context.Context, c *handoff.Consumer, m handoff.Message, clock *stocktest.Clock, max int) *stepDelivery {
	var last *stepDelivery
	for attempt := 1; attempt <= max; attempt++ {
		last = &stepDelivery{m: m, attempt: attempt}
		c.Settle(ctx, []handoff.Delivery{last})
		if last.ended != "retried" {
			break
		}
		clock.Advance(last.retry)
	}
	return last
}
