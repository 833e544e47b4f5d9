package handofftest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/stock"
)

func init() {
	register("RoundTrip", roundTrip)
	register("AckRemoves", ackRemoves)
	register("RetryAfterDelay", retryAfterDelay)
	register("RedeliveryAfterTimeout", redeliveryAfterTimeout)
	register("DeadLetter", deadLetter)
	register("FetchEndsWithContext", fetchEndsWithContext)
	register("ManyPublishersBatches", manyPublishersBatches)
	register("Oldest", oldest)
}

// message returns a message with every field set, times in whole
// milliseconds as brokers keep them.
func message(id string) handoff.Message {
	now := time.UnixMilli(time.Now().UnixMilli())
	return handoff.Message{
		Order: stock.Order{
			ID: id, UserID: "user-" + id,
			Items:   []stock.Item{{SKU: "sku-a", Qty: 2}, {SKU: "sku-b", Qty: 1}},
			HoldTTL: 90 * time.Second,
		},
		Deadline: now.Add(90 * time.Second),
		Sent:     now,
	}
}

// sameMessage reports how got differs from want, "" when it does not:
// every field equal, times to the millisecond.
func sameMessage(got, want handoff.Message) string {
	var diffs []string
	g, w := got.Order, want.Order
	if g.ID != w.ID || g.UserID != w.UserID || g.HoldTTL != w.HoldTTL || !slices.Equal(g.Items, w.Items) {
		diffs = append(diffs, fmt.Sprintf("order %+v, want %+v", g, w))
	}
	if got.Deadline.UnixMilli() != want.Deadline.UnixMilli() {
		diffs = append(diffs, fmt.Sprintf("deadline %v, want %v", got.Deadline, want.Deadline))
	}
	if got.Sent.UnixMilli() != want.Sent.UnixMilli() {
		diffs = append(diffs, fmt.Sprintf("sent %v, want %v", got.Sent, want.Sent))
	}
	return strings.Join(diffs, "; ")
}

// roundTrip: a published message is delivered once, on its first attempt,
// with every field as published.
func roundTrip(t *testing.T, h Harness) {
	q := h.New(t)
	src := q.NewSource()
	want := message("round-trip")
	if err := q.Publisher.Publish(bg(t), want); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	d := fetchOne(t, src, margin)
	if diff := sameMessage(d.Message(), want); diff != "" {
		t.Errorf("delivered message differs: %s", diff)
	}
	if d.Attempt() != 1 {
		t.Errorf("Attempt = %d on the first delivery, want 1", d.Attempt())
	}
	if err := d.Ack(bg(t)); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

// ackRemoves: an acknowledged message is never delivered again, to this
// consumer or another, even past the redelivery timeout.
func ackRemoves(t *testing.T, h Harness) {
	q := h.New(t)
	src, other := q.NewSource(), q.NewSource()
	if err := q.Publisher.Publish(bg(t), message("acked")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	d := fetchOne(t, src, margin)
	if err := d.Ack(bg(t)); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	fetchNone(t, other, 3*h.Redelivery)
	fetchNone(t, src, h.Redelivery)
}

// retryAfterDelay: Retry hands the message back, delivered again with
// Attempt one more, not before the delay (and, on a busy machine, within
// the delay plus the redelivery timeout plus margin).
func retryAfterDelay(t *testing.T, h Harness) {
	q := h.New(t)
	src := q.NewSource()
	want := message("retried")
	if err := q.Publisher.Publish(bg(t), want); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	d := fetchOne(t, src, margin)
	delay := h.Redelivery / 2
	start := time.Now()
	if err := d.Retry(bg(t), delay); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	again := fetchOne(t, q.NewSource(), delay+h.Redelivery+margin)
	if waited := time.Since(start); waited < delay-early {
		t.Errorf("redelivered %v after Retry(%v)", waited, delay)
	}
	if again.Attempt() != 2 {
		t.Errorf("Attempt = %d after one Retry, want 2", again.Attempt())
	}
	if diff := sameMessage(again.Message(), want); diff != "" {
		t.Errorf("redelivered message differs: %s", diff)
	}
	// A zero delay hands it back at once, one attempt more again.
	if err := again.Retry(bg(t), 0); err != nil {
		t.Fatalf("Retry(0): %v", err)
	}
	third := fetchOne(t, src, h.Redelivery+margin)
	if third.Attempt() != 3 {
		t.Errorf("Attempt = %d after two Retries, want 3", third.Attempt())
	}
	if err := third.Ack(bg(t)); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	fetchNone(t, src, 2*h.Redelivery)
}

// redeliveryAfterTimeout: a delivery left alone is delivered again (to any
// consumer of the queue) after the redelivery timeout, not before, with
// Attempt one more.
func redeliveryAfterTimeout(t *testing.T, h Harness) {
	q := h.New(t)
	src := q.NewSource()
	want := message("abandoned")
	if err := q.Publisher.Publish(bg(t), want); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	d := fetchOne(t, src, margin)
	start := time.Now()
	_ = d // left alone: its consumer stopped
	again := fetchOne(t, q.NewSource(), h.Redelivery+margin)
	if waited := time.Since(start); waited < h.Redelivery-early {
		t.Errorf("redelivered %v after the delivery; the timeout is %v", waited, h.Redelivery)
	}
	if again.Attempt() != 2 {
		t.Errorf("Attempt = %d on the redelivery, want 2", again.Attempt())
	}
	if diff := sameMessage(again.Message(), want); diff != "" {
		t.Errorf("redelivered message differs: %s", diff)
	}
	if err := again.Ack(bg(t)); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	fetchNone(t, src, 2*h.Redelivery)
}

// deadLetter: DeadLetter removes the message from the queue and puts it,
// as published and with the reason's text, in the dead letters.
func deadLetter(t *testing.T, h Harness) {
	q := h.New(t)
	src := q.NewSource()
	want := message("dead")
	if err := q.Publisher.Publish(bg(t), want); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	d := fetchOne(t, src, margin)
	reason := errors.New("cannot settle: bad payload")
	if err := d.DeadLetter(bg(t), reason); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}
	fetchNone(t, src, 2*h.Redelivery)
	dead, err := q.DeadLetters(bg(t))
	if err != nil {
		t.Fatalf("DeadLetters: %v", err)
	}
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1: %+v", len(dead), dead)
	}
	if diff := sameMessage(dead[0].Message, want); diff != "" {
		t.Errorf("dead letter differs: %s", diff)
	}
	if !strings.Contains(dead[0].Reason, reason.Error()) {
		t.Errorf("dead letter reason %q, want it to contain %q", dead[0].Reason, reason)
	}
}

// fetchEndsWithContext: Fetch on an empty queue returns when ctx ends,
// promptly, with no error and no delivery; with ctx already done it
// returns at once.
func fetchEndsWithContext(t *testing.T, h Harness) {
	q := h.New(t)
	src := q.NewSource()
	const wait = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	start := time.Now()
	ds, err := src.Fetch(ctx, 4)
	took := time.Since(start)
	if err != nil || len(ds) != 0 {
		t.Errorf("Fetch on an empty queue = %d deliveries, %v; want none, nil", len(ds), err)
	}
	if took > wait+margin {
		t.Errorf("Fetch returned %v after its context's %v deadline", took-wait, wait)
	}
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	start = time.Now()
	ds, err = src.Fetch(done, 4)
	if err != nil || len(ds) != 0 {
		t.Errorf("Fetch with a done context = %d deliveries, %v; want none, nil", len(ds), err)
	}
	if took := time.Since(start); took > margin {
		t.Errorf("Fetch with a done context took %v", took)
	}
}

// manyPublishersBatches: messages published concurrently are each
// delivered once, in batches of at most the size asked, to consumers
// sharing the queue.
func manyPublishersBatches(t *testing.T, h Harness) {
	const publishers, each, batch = 4, 25, 8
	q := h.New(t)
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range each {
				if err := q.Publisher.Publish(bg(t), message(fmt.Sprintf("p%d-%d", p, i))); err != nil {
					t.Errorf("Publish: %v", err)
					return
				}
			}
		})
	}
	var mu sync.Mutex
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 3*margin)
	defer cancel()
	for range 2 {
		src := q.NewSource()
		wg.Go(func() {
			for ctx.Err() == nil {
				ds, err := src.Fetch(ctx, batch)
				if err != nil {
					t.Errorf("Fetch: %v", err)
					return
				}
				if len(ds) > batch {
					t.Errorf("Fetch(ctx, %d) returned %d deliveries", batch, len(ds))
				}
				for _, d := range ds {
					if err := d.Ack(ctx); err != nil {
						t.Errorf("Ack: %v", err)
					}
					mu.Lock()
					seen[d.Message().Order.ID]++
					if len(seen) == publishers*each {
						cancel()
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != publishers*each {
		t.Fatalf("%d messages delivered, want %d", len(seen), publishers*each)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s delivered %d times, want once (each was acknowledged at once)", id, n)
		}
	}
}

// oldest: a Publisher that is a handoff.OldestReader tells the Sent time
// of the oldest message not acknowledged, delivered or not, retried with
// no delay or not (a Retry(0) puts it back in the queue, where it is
// still the oldest, behind newer messages or not), and false once there
// is none. (Skipped for a Publisher that is not one.)
func oldest(t *testing.T, h Harness) {
	q := h.New(t)
	o, ok := q.Publisher.(handoff.OldestReader)
	if !ok {
		t.Skip("the Publisher is not a handoff.OldestReader")
	}
	check := func(when string, want time.Time, wantOK bool) {
		t.Helper()
		got, ok, err := o.Oldest(bg(t))
		if err != nil || ok != wantOK || (ok && got.UnixMilli() != want.UnixMilli()) {
			t.Fatalf("Oldest %s = %v, %v, %v; want %v, %v", when, got, ok, err, want, wantOK)
		}
	}
	check("of an empty queue", time.Time{}, false)
	first, second := message("oldest-1"), message("oldest-2")
	first.Sent = first.Sent.Add(-2 * time.Second)
	second.Sent = second.Sent.Add(-time.Second)
	for _, m := range []handoff.Message{first, second} {
		if err := q.Publisher.Publish(bg(t), m); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	check("with two published", first.Sent, true)
	src := q.NewSource()
	ds := []handoff.Delivery{fetchOne(t, src, margin), fetchOne(t, src, margin)}
	check("with both in a consumer's hands", first.Sent, true)
	slices.SortFunc(ds, func(a, b handoff.Delivery) int { return a.Message().Sent.Compare(b.Message().Sent) })
	if err := ds[0].Retry(bg(t), 0); err != nil {
		t.Fatalf("Retry(0): %v", err)
	}
	check("with the first retried (no delay)", first.Sent, true)
	ds[0] = fetchOne(t, src, margin)
	if id := ds[0].Message().Order.ID; id != first.Order.ID {
		t.Fatalf("Fetch after Retry(0) of %s delivered %s", first.Order.ID, id)
	}
	check("with the retried first in a consumer's hands again", first.Sent, true)
	if err := ds[0].Ack(bg(t)); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	check("once the first is acknowledged", second.Sent, true)
	if err := ds[1].Ack(bg(t)); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	check("once both are acknowledged", time.Time{}, false)
}
