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

// slowRecord is a record whose write takes the time the test says (on its
// clock): the gate hold runs out while the record is written.
type slowRecord struct {
	*memstock.Store
	clock *stocktest.Clock
	takes time.Duration
}

func (r *slowRecord) Deduct(ctx context.Context, o stock.Order) error {
	err := r.Store.Deduct(ctx, o)
	r.clock.Advance(r.takes)
	return err
}

// Done reports nil only for an order the record has: a message settled
// just before its deadline, whose gate hold runs out while the record is
// written (Settle's recheck returns the record's copy), is reported with
// stock.ErrHoldExpired and acknowledged.
func TestDoneReportsExpiredForAHoldThatRanOutWhileRecorded(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(t0)
	q := handofftest.NewMemory(time.Hour)
	gate := memstock.New(clock)
	record := &slowRecord{Store: memstock.New(clock), clock: clock}
	rec := handoff.NewRecorder(q, gate, handoff.RecorderConfig{Clock: clock})
	flow := tiered.New(gate, record, tiered.Config{Recorder: rec, Clock: clock})
	if err := flow.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Place(ctx, order("o1", 2)); err != nil {
		t.Fatal(err)
	}
	var ended []error
	c, err := handoff.NewConsumer(q.Source(), flow, handoff.ConsumerConfig{Clock: clock,
		Done: func(_ context.Context, _ handoff.Message, err error) { ended = append(ended, err) }})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(59 * time.Second) // delivered a second before its deadline
	record.takes = 2 * time.Second  // and the record write outlives it
	c.Settle(ctx, fetch(t, q.Source(), 1))
	in, _ := record.Orders(ctx, []string{"o1"})
	held := len(in) == 1 && in[0].State.Takes()
	if len(ended) == 1 && ended[0] == nil && !held {
		cerr := flow.Confirm(ctx, "o1")
		t.Fatalf("Done(nil) (\"the record has the order\"), but the record holds nothing of o1 (%+v) and Confirm = %v", in, cerr)
	}
	if len(ended) != 1 || !errors.Is(ended[0], stock.ErrHoldExpired) || q.Len() != 0 {
		t.Fatalf("Done got %v, queue holds %d; want one stock.ErrHoldExpired and the message acknowledged", ended, q.Len())
	}
}
