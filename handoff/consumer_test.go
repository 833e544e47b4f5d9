package handoff_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// shop is a tiered flow over memstock tiers on a test clock whose Recorder
// publishes to a Memory queue through a Publisher that does not tell the
// broker's lag: the Recorder's lag is RecorderConfig.Lag, s.lag.
type shop struct {
	clock        *stocktest.Clock
	gate, record *memstock.Store
	q            *handofftest.Memory
	rec          *handoff.Recorder
	flow         *tiered.Manager
	lag          time.Duration // what the Recorder's Lag reports
	mu           sync.Mutex
}

func newShop(t *testing.T, hold time.Duration, cfg handoff.RecorderConfig) *shop {
	t.Helper()
	s := &shop{clock: stocktest.NewClock(t0), q: handofftest.NewMemory(time.Hour)}
	s.gate, s.record = memstock.New(s.clock), memstock.New(s.clock)
	cfg.Clock = s.clock
	if cfg.Lag == nil {
		cfg.Lag = func() time.Duration { s.mu.Lock(); defer s.mu.Unlock(); return s.lag }
	}
	s.rec = handoff.NewRecorder(publisherOnly{s.q}, s.gate, cfg)
	s.flow = tiered.New(s.gate, s.record, tiered.Config{Recorder: s.rec, Clock: s.clock})
	if err := s.flow.PutOnSale(context.Background(), stock.Listing{SKU: "a", Units: 10, HoldTTL: hold}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *shop) setLag(d time.Duration) { s.mu.Lock(); s.lag = d; s.mu.Unlock() }

// publisherOnly hides every method of a Publisher but Publish.
type publisherOnly struct{ handoff.Publisher }

func fetch(t *testing.T, src handoff.Source, n int) []handoff.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := src.Fetch(ctx, n)
	if err != nil || len(ds) == 0 {
		t.Fatalf("Fetch = %d, %v", len(ds), err)
	}
	return ds
}

func order(id string, qty int64) stock.Order {
	return stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: qty}}}
}

// The Recorder's message carries the gate's deadline, read from the
// listing (or the order's own hold time), not a setting of its own.
func TestRecorderDeadlineIsTheGates(t *testing.T) {
	ctx := context.Background()
	s := newShop(t, 90*time.Second, handoff.RecorderConfig{})
	if _, err := s.flow.Place(ctx, order("o1", 1)); err != nil {
		t.Fatal(err)
	}
	own := order("o2", 1)
	own.HoldTTL = 20 * time.Second
	if _, err := s.flow.Place(ctx, own); err != nil {
		t.Fatal(err)
	}
	ds := fetch(t, s.q.Source(), 2)
	if len(ds) != 2 {
		t.Fatalf("%d messages, want 2", len(ds))
	}
	for i, want := range []time.Duration{90 * time.Second, 20 * time.Second} {
		m := ds[i].Message()
		if !m.Sent.Equal(t0) || !m.Deadline.Equal(t0.Add(want)) {
			t.Errorf("%s: sent %v deadline %v; want %v and %v", m.Order.ID, m.Sent, m.Deadline, t0, t0.Add(want))
		}
	}
}

// A message delivered after its deadline is counted expired in the queue
// and still settled: Settle returns its hold, the record never holds it,
// and it is acknowledged.
func TestConsumerExpiredInQueue(t *testing.T) {
	ctx := context.Background()
	s := newShop(t, time.Minute, handoff.RecorderConfig{})
	if _, err := s.flow.Place(ctx, order("o1", 3)); err != nil {
		t.Fatal(err)
	}
	var rec observe.Recorder
	var ended []error
	c, err := handoff.NewConsumer(s.q.Source(), s.flow, handoff.ConsumerConfig{Clock: s.clock, Observer: rec.Observer(),
		Done: func(_ context.Context, _ handoff.Message, err error) { ended = append(ended, err) }})
	if err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(2 * time.Minute)
	c.Settle(ctx, fetch(t, s.q.Source(), 8))
	if len(ended) != 1 || !errors.Is(ended[0], stock.ErrHoldExpired) {
		t.Fatalf("Done got %v, want one ErrHoldExpired", ended)
	}
	hs := rec.Handoffs()
	if len(hs) != 1 || !hs[0].Expired || hs[0].Outcome != observe.Expired || hs[0].Lag != 2*time.Minute || hs[0].DeadLettered {
		t.Fatalf("Handoff reports %+v, want one expired, lag 2m", hs)
	}
	if n := s.q.Len(); n != 0 {
		t.Fatalf("%d messages left in the queue, want 0 (acknowledged)", n)
	}
	lv, err := s.record.Levels(ctx, "a")
	if err != nil || lv.Held != 0 || lv.Available != 10 {
		t.Fatalf("record %+v, %v; want nothing held", lv, err)
	}
}

// settler is a Settle that fails, or blocks until released.
type settler struct {
	mu      sync.Mutex
	err     error
	calls   int
	settled bool
}

func (f *settler) Settle(context.Context, stock.Order) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.settled = true
	return f.err
}

// recordingSource records the Retry delays and checks that each Ack comes
// after Settle returned.
type recordingSource struct {
	handoff.Source
	f      *settler
	mu     sync.Mutex
	delays []time.Duration
	early  int
}

func (s *recordingSource) Fetch(ctx context.Context, n int) ([]handoff.Delivery, error) {
	ds, err := s.Source.Fetch(ctx, n)
	for i, d := range ds {
		ds[i] = &recordingDelivery{Delivery: d, s: s}
	}
	return ds, err
}

type recordingDelivery struct {
	handoff.Delivery
	s *recordingSource
}

func (d *recordingDelivery) Retry(ctx context.Context, delay time.Duration) error {
	d.s.mu.Lock()
	d.s.delays = append(d.s.delays, delay)
	d.s.mu.Unlock()
	return d.Delivery.Retry(ctx, delay)
}

func (d *recordingDelivery) Ack(ctx context.Context) error {
	d.s.f.mu.Lock()
	if !d.s.f.settled {
		d.s.early++
	}
	d.s.f.mu.Unlock()
	return d.Delivery.Ack(ctx)
}

// An infrastructure failure is retried with a doubling backoff, and the
// message dead-lettered on attempt MaxAttempts with the reason.
func TestConsumerRetriesThenDeadLetters(t *testing.T) {
	q := handofftest.NewMemory(time.Hour) // only Retry brings a message back
	f := &settler{err: errors.New("record down")}
	src := &recordingSource{Source: q.Source(), f: f}
	done := make(chan error, 1)
	c, err := handoff.NewConsumer(src, f, handoff.ConsumerConfig{MaxAttempts: 3, Backoff: time.Millisecond,
		Done: func(_ context.Context, _ handoff.Message, err error) { done <- err }})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(context.Background(), handoff.Message{Order: order("o1", 1), Sent: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	var got error
	select {
	case got = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("not dead-lettered within 20s")
	}
	cancel()
	wg.Wait()
	if !errors.Is(got, handoff.ErrDeadLettered) || !strings.Contains(got.Error(), "record down") {
		t.Fatalf("Done got %v, want ErrDeadLettered with the reason", got)
	}
	if f.calls != 3 {
		t.Fatalf("Settle called %d times, want 3 (MaxAttempts)", f.calls)
	}
	if want := []time.Duration{time.Millisecond, 2 * time.Millisecond}; len(src.delays) != 2 || src.delays[0] != want[0] || src.delays[1] != want[1] {
		t.Fatalf("Retry delays %v, want %v", src.delays, want)
	}
	dead, _ := q.DeadLetters(context.Background())
	if len(dead) != 1 || !strings.Contains(dead[0].Reason, "record down") || q.Len() != 0 {
		t.Fatalf("dead letters %+v, queue %d; want the message with its reason, queue empty", dead, q.Len())
	}
}

// A message that can never settle (an invalid order: a payload the
// adapter could not decode) is dead-lettered on its first delivery; a
// business error is acknowledged, and only after Settle returned.
func TestConsumerInvalidAndBusiness(t *testing.T) {
	ctx := context.Background()
	q := handofftest.NewMemory(time.Hour)
	f := &settler{err: stock.ErrSoldOut}
	src := &recordingSource{Source: q.Source(), f: f}
	var ended []error
	c, err := handoff.NewConsumer(src, f, handoff.ConsumerConfig{
		Done: func(_ context.Context, _ handoff.Message, err error) { ended = append(ended, err) }})
	if err != nil {
		t.Fatal(err)
	}
	_ = q.Publish(ctx, handoff.Message{Order: order("o1", 1)})
	c.Settle(ctx, fetch(t, src, 1))
	if len(ended) != 1 || !errors.Is(ended[0], stock.ErrSoldOut) || src.early != 0 || q.Len() != 0 {
		t.Fatalf("business error: Done %v, %d early acks, queue %d; want ErrSoldOut, 0, 0", ended, src.early, q.Len())
	}
	f.err = &stock.InvalidError{Field: "order", Reason: "empty"}
	_ = q.Publish(ctx, handoff.Message{})
	c.Settle(ctx, fetch(t, src, 1))
	dead, _ := q.DeadLetters(ctx)
	if len(ended) != 2 || !errors.Is(ended[1], handoff.ErrDeadLettered) || len(dead) != 1 {
		t.Fatalf("invalid: Done %v, dead letters %d; want ErrDeadLettered on attempt 1", ended, len(dead))
	}
}

// Lag is the age of the oldest message in hand, then the lag the batch
// ended with, until a Fetch finds the queue empty.
func TestConsumerLag(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(t0)
	q := handofftest.NewMemory(time.Hour)
	var c *handoff.Consumer
	var during time.Duration
	flow := settlerFunc(func(context.Context, stock.Order) error {
		during = c.Lag()
		clock.Advance(time.Second)
		return nil
	})
	c, _ = handoff.NewConsumer(q.Source(), flow, handoff.ConsumerConfig{Clock: clock, Batch: 1})
	if c.Lag() != 0 {
		t.Fatalf("Lag %v before any batch, want 0", c.Lag())
	}
	_ = q.Publish(ctx, handoff.Message{Order: order("o1", 1), Sent: t0.Add(-5 * time.Second)})
	c.Settle(ctx, fetch(t, q.Source(), 1))
	if during != 5*time.Second {
		t.Errorf("Lag %v while settling a message sent 5s ago, want 5s", during)
	}
	clock.Advance(time.Minute)
	if c.Lag() != 6*time.Second {
		t.Errorf("Lag %v after the batch, want the 6s it ended with", c.Lag())
	}
	c.Settle(ctx, nil) // an empty Fetch
	if c.Lag() != 0 {
		t.Errorf("Lag %v once the queue was found empty, want 0", c.Lag())
	}
}

type settlerFunc func(context.Context, stock.Order) error

func (f settlerFunc) Settle(ctx context.Context, o stock.Order) error { return f(ctx, o) }

// Admit refuses new orders while the lag exceeds the bound (by default
// half the order's hold time), retryably and holding nothing.
func TestRecorderBackpressure(t *testing.T) {
	ctx := context.Background()
	s := newShop(t, time.Minute, handoff.RecorderConfig{})
	s.setLag(31 * time.Second)
	_, err := s.flow.Place(ctx, order("o1", 1))
	if !errors.Is(err, handoff.ErrBacklog) || !errors.Is(err, stock.ErrContention) {
		t.Fatalf("Place with a 31s lag and a 1m hold: %v, want ErrBacklog (ErrContention)", err)
	}
	if lv, _ := s.gate.Levels(ctx, "a"); lv.Held != 0 || s.q.Len() != 0 {
		t.Fatalf("refused order: gate holds %d, queue %d; want 0, 0", lv.Held, s.q.Len())
	}
	s.setLag(29 * time.Second)
	if _, err := s.flow.Place(ctx, order("o1", 1)); err != nil {
		t.Fatalf("Place with a 29s lag: %v", err)
	}
	fixed := newShop(t, time.Minute, handoff.RecorderConfig{MaxLag: time.Second})
	fixed.setLag(2 * time.Second)
	if err := fixed.rec.Admit(ctx, order("o2", 1)); !errors.Is(err, handoff.ErrBacklog) {
		t.Fatalf("Admit over MaxLag: %v", err)
	}
	off := newShop(t, time.Minute, handoff.RecorderConfig{MaxLag: -1})
	off.setLag(time.Hour)
	if err := off.rec.Admit(ctx, order("o3", 1)); err != nil {
		t.Fatalf("Admit with no bound: %v", err)
	}
}

// Over a Publisher that tells the broker's lag (an OldestReader), Admit
// reads it, asking again once the answer is LagCache old, and the larger
// of it and the in-process measure (RecorderConfig.Lag) counts: the
// in-process one alone while the broker fails.
func TestRecorderLagIsTheBrokers(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(t0)
	q := handofftest.NewMemory(time.Hour)
	gate := memstock.New(clock)
	var local atomic.Int64 // the in-process measure
	local.Store(int64(time.Hour))
	rec := handoff.NewRecorder(q, gate, handoff.RecorderConfig{Clock: clock, LagCache: 100 * time.Millisecond,
		Lag: func() time.Duration { return time.Duration(local.Load()) }})
	flow := tiered.New(gate, memstock.New(clock), tiered.Config{Recorder: rec, Clock: clock})
	if err := flow.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Place(ctx, order("o1", 1)); !errors.Is(err, handoff.ErrBacklog) {
		t.Fatalf("Place on an empty queue with this node's consumers an hour behind: %v, want ErrBacklog", err)
	}
	local.Store(0)
	if _, err := flow.Place(ctx, order("o1", 1)); err != nil {
		t.Fatalf("Place on an empty queue: %v", err)
	}
	if err := rec.Admit(ctx, order("o2", 1)); err != nil {
		t.Fatalf("Admit with o1 just sent: %v", err)
	}
	clock.Advance(31 * time.Second)
	if lag := rec.Lag(ctx); lag != 31*time.Second {
		t.Fatalf("Lag %v with o1 sent 31s ago, want 31s", lag)
	}
	if err := rec.Admit(ctx, order("o2", 1)); !errors.Is(err, handoff.ErrBacklog) {
		t.Fatalf("Admit with the broker 31s behind and a 1m hold: %v, want ErrBacklog", err)
	}
	// A buyer who went away is no answer of the broker's: the next
	// Admit, LagCache later, asks again (the broker still 31s behind).
	clock.Advance(100 * time.Millisecond)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	_ = rec.Admit(gone, order("o2", 1))
	if lag := rec.Lag(ctx); lag != 31*time.Second+100*time.Millisecond {
		t.Fatalf("Lag %v after a call cut short by its caller, want the broker's 31.1s", lag)
	}
	d := fetch(t, q.Source(), 1)[0]
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(99 * time.Millisecond)
	if err := rec.Admit(ctx, order("o2", 1)); !errors.Is(err, handoff.ErrBacklog) {
		t.Fatalf("Admit within LagCache of the last answer: %v, want it reused (ErrBacklog)", err)
	}
	clock.Advance(time.Millisecond)
	if err := rec.Admit(ctx, order("o2", 1)); err != nil {
		t.Fatalf("Admit LagCache after the answer, the queue empty: %v", err)
	}

	// A broker that cannot tell: the in-process measure.
	local.Store(int64(time.Hour))
	broken := handoff.NewRecorder(failingOldest{q}, gate, handoff.RecorderConfig{Clock: clock,
		Lag: func() time.Duration { return time.Duration(local.Load()) }})
	if err := broken.Admit(ctx, order("o3", 1)); !errors.Is(err, handoff.ErrBacklog) {
		t.Fatalf("Admit with Oldest failing and the in-process lag an hour: %v, want ErrBacklog", err)
	}
	local.Store(0)
	clock.Advance(time.Second)
	if err := broken.Admit(ctx, order("o3", 1)); err != nil {
		t.Fatalf("Admit with Oldest failing and no in-process lag: %v", err)
	}
}

// failingOldest is a Publisher whose Oldest fails.
type failingOldest struct{ handoff.Publisher }

func (failingOldest) Oldest(context.Context) (time.Time, bool, error) {
	return time.Time{}, false, errors.New("broker unreachable")
}

// lostAck is a delivery whose Ack applies at the broker and whose reply
// is lost: the message is gone and no redelivery will come.
type lostAck struct{ handoff.Delivery }

func (d lostAck) Ack(ctx context.Context) error {
	if err := d.Delivery.Ack(ctx); err != nil {
		return err
	}
	return errors.New("connection reset (the Ack applied)")
}

type lostAckSource struct{ handoff.Source }

func (s lostAckSource) Fetch(ctx context.Context, n int) ([]handoff.Delivery, error) {
	ds, err := s.Source.Fetch(ctx, n)
	for i, d := range ds {
		ds[i] = lostAck{d}
	}
	return ds, err
}

// The record decides an order's end: an order whose Settle answered is
// reported to Done even when the reply of its Ack was lost. When Done
// waited for the Ack, a lost reply of an Ack that applied left the order
// recorded and never reported (the example sale counted it a lost sale).
func TestConsumerReportsTheOrderWhenTheAckReplyIsLost(t *testing.T) {
	ctx := context.Background()
	s := newShop(t, time.Minute, handoff.RecorderConfig{})
	if _, err := s.flow.Place(ctx, order("o1", 3)); err != nil {
		t.Fatal(err)
	}
	var ended []error
	src := lostAckSource{s.q.Source()}
	c, err := handoff.NewConsumer(src, s.flow, handoff.ConsumerConfig{Clock: s.clock,
		Done: func(_ context.Context, _ handoff.Message, err error) { ended = append(ended, err) }})
	if err != nil {
		t.Fatal(err)
	}
	c.Settle(ctx, fetch(t, src, 8))
	if len(ended) != 1 || ended[0] != nil {
		t.Fatalf("Done got %v, want one nil (recorded)", ended)
	}
	if n := s.q.Len(); n != 0 {
		t.Fatalf("%d messages left in the queue, want 0 (the Ack applied)", n)
	}
	lv, err := s.record.Levels(ctx, "a")
	if err != nil || lv.Held != 3 {
		t.Fatalf("record %+v, %v; want 3 held", lv, err)
	}
}
