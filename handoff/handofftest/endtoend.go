package handofftest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/tiered"
)

func init() {
	register("EndToEnd", endToEnd)
}

// ledger counts, per order ID, the messages published and acknowledged.
type ledger struct {
	mu        sync.Mutex
	published map[string]int
	acked     map[string]int
	done      map[string]int
	nPub      atomic.Int64
}

type countingPublisher struct {
	handoff.Publisher
	l *ledger
}

func (p countingPublisher) Publish(ctx context.Context, m handoff.Message) error {
	err := p.Publisher.Publish(ctx, m)
	if err == nil {
		p.l.mu.Lock()
		p.l.published[m.Order.ID]++
		p.l.mu.Unlock()
		p.l.nPub.Add(1)
	}
	return err
}

// countingSource counts the acknowledgements of its deliveries. A
// crashing one stops acknowledging after its first batch, as a consumer
// killed between Settle and Ack, and stops its consumer.
type countingSource struct {
	handoff.Source
	l     *ledger
	crash func() // nil: a healthy consumer
}

func (s countingSource) Fetch(ctx context.Context, n int) ([]handoff.Delivery, error) {
	ds, err := s.Source.Fetch(ctx, n)
	out := make([]handoff.Delivery, len(ds))
	for i, d := range ds {
		out[i] = countingDelivery{Delivery: d, l: s.l, gone: s.crash != nil}
	}
	if len(ds) > 0 && s.crash != nil {
		s.crash()
	}
	return out, err
}

type countingDelivery struct {
	handoff.Delivery
	l    *ledger
	gone bool
}

var errGone = errors.New("handofftest: the consumer was killed")

func (d countingDelivery) Ack(ctx context.Context) error {
	if d.gone {
		return errGone
	}
	err := d.Delivery.Ack(ctx)
	if err == nil {
		d.l.mu.Lock()
		d.l.acked[d.Message().Order.ID]++
		d.l.mu.Unlock()
	}
	return err
}

func (d countingDelivery) Retry(ctx context.Context, delay time.Duration) error {
	if d.gone {
		return errGone
	}
	return d.Delivery.Retry(ctx, delay)
}

func (d countingDelivery) DeadLetter(ctx context.Context, reason error) error {
	if d.gone {
		return errGone
	}
	return d.Delivery.DeadLetter(ctx, reason)
}

// endToEnd: concurrent buyers place orders on a tiered flow whose
// Recorder publishes to the queue (one order placed twice, so handed off
// twice), and consumers settle them into the record: the first consumer
// is killed between Settle and Ack of its first batch, and the others
// take its messages after the redelivery timeout. Every order is
// recorded exactly once, the tiers hold exactly the units ordered, every
// message is acknowledged exactly once, none is dead-lettered, and the
// queue is empty after.
func endToEnd(t *testing.T, h Harness) {
	const (
		sku           = "e2e"
		units         = 1000
		buyers, each  = 4, 20
		consumers     = 3
		batch         = 8
		hold          = 10 * time.Minute
		qtyOf         = 2 // units per order
		placedTwiceAt = 3 // each buyer places its order #3 twice
	)
	q := h.New(t)
	l := &ledger{published: map[string]int{}, acked: map[string]int{}, done: map[string]int{}}
	gate, record := memstock.New(stock.SystemClock), memstock.New(stock.SystemClock)
	rec := handoff.NewRecorder(countingPublisher{q.Publisher, l}, gate, handoff.RecorderConfig{})
	flow := tiered.New(gate, record, tiered.Config{Recorder: rec})
	ctx := bg(t)
	if err := flow.PutOnSale(ctx, stock.Listing{SKU: sku, Units: units, HoldTTL: hold}); err != nil {
		t.Fatalf("PutOnSale: %v", err)
	}

	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	var running sync.WaitGroup
	start := func(src handoff.Source) *handoff.Consumer {
		c, err := handoff.NewConsumer(src, flow, handoff.ConsumerConfig{Batch: batch, Backoff: time.Millisecond,
			Done: func(_ context.Context, m handoff.Message, err error) {
				if err != nil {
					t.Errorf("order %s ended with %v, want recorded", m.Order.ID, err)
				}
				l.mu.Lock()
				l.done[m.Order.ID]++
				l.mu.Unlock()
			}})
		if err != nil {
			t.Fatalf("NewConsumer: %v", err)
		}
		return c
	}
	// The first consumer runs alone until it has taken a batch, and is
	// killed as it settles it.
	killed := make(chan struct{})
	crashCtx, crash := context.WithCancel(runCtx)
	var once sync.Once
	first := start(countingSource{Source: q.NewSource(), l: l, crash: func() { once.Do(func() { crash(); close(killed) }) }})
	running.Go(func() { _ = first.Run(crashCtx) })

	var buying sync.WaitGroup
	ids := map[string]bool{}
	for b := range buyers {
		for i := range each {
			ids[fmt.Sprintf("b%d-o%d", b, i)] = true
		}
		buying.Go(func() {
			for i := range each {
				o := stock.Order{ID: fmt.Sprintf("b%d-o%d", b, i), UserID: fmt.Sprintf("u%d", b), Items: []stock.Item{{SKU: sku, Qty: qtyOf}}}
				times := 1
				if i == placedTwiceAt {
					times = 2
				}
				for range times {
					if p, err := flow.Place(ctx, o); err != nil || p != tiered.Pending {
						t.Errorf("Place %s: %v, %v; want pending", o.ID, p, err)
					}
				}
			}
		})
	}
	select {
	case <-killed:
	case <-ctx.Done():
		t.Fatal("the first consumer got no message")
	}
	for range consumers - 1 {
		c := start(countingSource{Source: q.NewSource(), l: l})
		running.Go(func() { _ = c.Run(runCtx) })
	}
	buying.Wait()
	want := int64(buyers * (each + 1))
	if n := l.nPub.Load(); n != want {
		t.Fatalf("%d messages published, want %d (one order of each buyer twice)", n, want)
	}
	deadline := time.Now().Add(h.Redelivery + 3*margin)
	for !l.allAcked(ids, h.Deduplicates) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	running.Wait()

	l.mu.Lock()
	defer l.mu.Unlock()
	// Each message is acknowledged, and Done told, at least once: a
	// delivery that outlives the timeout (a starved consumer) is delivered
	// again and both acknowledge it, which the queue being empty below and
	// the exact levels bound.
	for id := range ids {
		if msgs := l.messages(id, h.Deduplicates); l.acked[id] < msgs {
			t.Errorf("order %s: %d messages acknowledged, want %d (%d published)", id, l.acked[id], msgs, l.published[id])
		}
		// Done is told once Settle answered, Ack or not: at least once
		// per message and per acknowledgement.
		if msgs := l.messages(id, h.Deduplicates); l.done[id] < max(msgs, l.acked[id]) {
			t.Errorf("order %s: Done called %d times, want at least once per message (%d) and per acknowledgement (%d)", id, l.done[id], msgs, l.acked[id])
		}
	}
	infos, err := record.Orders(ctx, keys(ids))
	if err != nil {
		t.Fatalf("record Orders: %v", err)
	}
	for _, in := range infos {
		if in.State != stock.StateHeld {
			t.Errorf("order %s is %v at the record, want held", in.ID, in.State)
		}
	}
	taken := int64(buyers * each * qtyOf)
	for _, tier := range []struct {
		name string
		m    stock.Manager
	}{{"gate", gate}, {"record", record}} {
		lv, err := tier.m.Levels(ctx, sku)
		if err != nil {
			t.Fatalf("%s Levels: %v", tier.name, err)
		}
		if lv.Held != taken || lv.Available != units-taken || lv.Sold != 0 {
			t.Errorf("%s: available %d held %d sold %d; want %d, %d, 0 (each order once)", tier.name, lv.Available, lv.Held, lv.Sold, units-taken, taken)
		}
	}
	dead, err := q.DeadLetters(ctx)
	if err != nil || len(dead) != 0 {
		t.Errorf("DeadLetters = %d, %v; want none", len(dead), err)
	}
	fetchNone(t, q.NewSource(), 2*h.Redelivery)
}

// allAcked reports whether every published message of ids was
// acknowledged.
// messages is how many messages of order id are in the queue: one per
// publish, or one at a broker that deduplicates. Call with l.mu held.
func (l *ledger) messages(id string, dedup bool) int {
	if dedup {
		return min(l.published[id], 1)
	}
	return l.published[id]
}

func (l *ledger) allAcked(ids map[string]bool, dedup bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range ids {
		if l.acked[id] < l.messages(id, dedup) {
			return false
		}
	}
	return true
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
