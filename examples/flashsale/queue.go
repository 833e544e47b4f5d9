package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// queue is the hand-off from the gate to the record, on the library's
// package handoff: a handoff.Recorder publishes each order the gate holds
// to the broker -queue names, and handoff.Consumers settle them into the
// record. It adds the sale's own bookkeeping: what is on its way to the
// record, per SKU, and the hand-offs' lags for the report.
type queue struct {
	b         *broker
	consumers []*handoff.Consumer

	redelivered, deadLettered, expired atomic.Int64

	mu sync.Mutex
	// pending are the orders published and not ended yet, by ID: an
	// order handed off twice, or whose message was delivered twice (a
	// redelivery after the broker's timeout while the first delivery was
	// still settling), counts once and ends once.
	pending map[string]stock.Order
	// units are the units of each SKU's orders on the way: held at the
	// gate, on their way to the record; placing those of orders being
	// placed (the gate may hold them before their hand-off is published).
	units, placing map[string]int64
	lags           []time.Duration // publish to record, per delivery that ended
}

func newQueue(b *broker) *queue {
	return &queue{b: b, pending: map[string]stock.Order{}, units: map[string]int64{}, placing: map[string]int64{}}
}

// Publish publishes m to the broker and counts it on its way.
func (q *queue) Publish(ctx context.Context, m handoff.Message) error {
	if err := q.b.pub.Publish(ctx, m); err != nil {
		return err
	}
	q.mu.Lock()
	if _, dup := q.pending[m.Order.ID]; !dup {
		q.pending[m.Order.ID] = m.Order
		for _, it := range m.Order.Items {
			q.units[it.SKU] += it.Qty
		}
	}
	q.mu.Unlock()
	return nil
}

// Oldest is the broker's oldest message not acknowledged
// (handoff.OldestReader), the lag the Recorder's backpressure reads; a
// broker that cannot tell leaves it to the consumers' own lag.
func (q *queue) Oldest(ctx context.Context) (time.Time, bool, error) {
	o, ok := q.b.pub.(handoff.OldestReader)
	if !ok {
		return time.Time{}, false, errNoOldest
	}
	return o.Oldest(ctx)
}

var errNoOldest = errors.New("the broker does not tell its oldest message")

// done counts a message that ended (a Consumer's ConsumerConfig.Done).
func (q *queue) done(m handoff.Message, err error) {
	q.mu.Lock()
	if o, ok := q.pending[m.Order.ID]; ok {
		delete(q.pending, m.Order.ID)
		for _, it := range o.Items {
			q.units[it.SKU] -= it.Qty
		}
	}
	q.mu.Unlock()
	if errors.Is(err, handoff.ErrDeadLettered) {
		q.deadLettered.Add(1)
	}
}

// observer adds the queue's own counts to obs's Handoff hook.
func (q *queue) observer(obs observe.Observer) observe.Observer {
	next := obs.Handoff
	obs.Handoff = func(ctx context.Context, h observe.Handoff) {
		q.mu.Lock()
		q.lags = append(q.lags, h.Lag)
		q.mu.Unlock()
		if h.Attempt > 1 {
			q.redelivered.Add(1)
		}
		if h.Expired {
			q.expired.Add(1)
		}
		if next != nil {
			next(ctx, h)
		}
	}
	return obs
}

// lagQuantiles returns the p50 and p99 of the lags of the deliveries that
// ended, and how many there were.
func (q *queue) lagQuantiles() (p50, p99 time.Duration, n int) {
	q.mu.Lock()
	lags := slices.Clone(q.lags)
	q.mu.Unlock()
	if len(lags) == 0 {
		return 0, 0, 0
	}
	slices.Sort(lags)
	at := func(p float64) time.Duration { return lags[min(len(lags)-1, int(p*float64(len(lags))))] }
	return at(0.50), at(0.99), len(lags)
}

// onTheWay is the units of sku's hand-offs not ended yet, and of its
// orders being placed.
func (q *queue) onTheWay(sku string) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return max(0, q.units[sku]) + q.placing[sku]
}

// place counts n units of sku being placed (negative n: placed).
func (q *queue) place(sku string, n int64) {
	q.mu.Lock()
	q.placing[sku] += n
	q.mu.Unlock()
}

// inFlight is the number of orders published and not yet ended.
func (q *queue) inFlight() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int64(len(q.pending))
}

// drain waits until the broker holds no message (every one acknowledged
// or dead-lettered), or ctx ends. It is the broker that says: an
// acknowledgement whose reply was lost (the broker went away after
// applying it) ends no order here, and a second message of an order
// ended here may still be on its way.
func (q *queue) drain(ctx context.Context) error {
	for {
		if n, err := q.b.left(ctx); err == nil && n == 0 {
			return nil
		}
		if err := pause(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// pause sleeps for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
