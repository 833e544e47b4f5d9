package handofftest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
)

// Memory is an in-process queue: a handoff.Publisher whose Sources share
// its messages. It keeps the adapter contract (it passes Run), so it
// stands in for a broker in a shop's own tests; it keeps nothing across a
// restart, so it is no hand-off for production.
//
// A Memory is safe for concurrent use. The zero value is not usable: call
// NewMemory.
type Memory struct {
	redelivery time.Duration

	mu    sync.Mutex
	seq   int
	msgs  map[int]*memMsg
	dead  []DeadLetter
	wake  chan struct{} // closed and replaced when a message is published or handed back
	clock func() time.Time
}

// memMsg is one message in a Memory and its current delivery.
type memMsg struct {
	id      int
	m       handoff.Message
	attempt int       // deliveries so far
	visible time.Time // when it may be delivered (again)
	lease   int       // the current delivery's number; 0 before the first
}

// NewMemory returns an empty queue whose deliveries that are not
// acknowledged, retried or dead-lettered are delivered again after
// redelivery (at least a millisecond).
func NewMemory(redelivery time.Duration) *Memory {
	return &Memory{redelivery: max(redelivery, time.Millisecond), msgs: map[int]*memMsg{}, wake: make(chan struct{}), clock: time.Now}
}

// Harness returns the Harness of the suite for Memory queues with the
// given redelivery timeout: Run(t, handofftest.NewMemory(...).Harness())
// runs the suite on fresh Memory queues like this one.
func (q *Memory) Harness() Harness {
	return Harness{
		Redelivery: q.redelivery,
		New: func(t *testing.T) Queue {
			return NewMemory(q.redelivery).Queue()
		},
	}
}

// Queue returns q as the suite's Queue.
func (q *Memory) Queue() Queue {
	return Queue{Publisher: q, NewSource: q.Source, DeadLetters: q.DeadLetters}
}

// Publish queues m. It fails only when ctx has ended.
func (q *Memory) Publish(ctx context.Context, m handoff.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.Order.Items = slices.Clone(m.Order.Items)
	q.mu.Lock()
	q.seq++
	q.msgs[q.seq] = &memMsg{id: q.seq, m: m}
	q.notifyLocked()
	q.mu.Unlock()
	return nil
}

// Oldest returns the Sent time of the oldest message in q not
// acknowledged or dead-lettered yet (handoff.OldestReader), and false when
// there is none.
func (q *Memory) Oldest(ctx context.Context) (time.Time, bool, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, false, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var oldest time.Time
	for _, m := range q.msgs {
		if oldest.IsZero() || m.m.Sent.Before(oldest) {
			oldest = m.m.Sent
		}
	}
	return oldest, len(q.msgs) > 0, nil
}

// Source returns a new consumer of q.
func (q *Memory) Source() handoff.Source { return memSource{q} }

// DeadLetters returns the messages dead-lettered so far, in order.
func (q *Memory) DeadLetters(ctx context.Context) ([]DeadLetter, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.dead), ctx.Err()
}

// Len returns the number of messages in q not acknowledged or
// dead-lettered yet.
func (q *Memory) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}

func (q *Memory) notifyLocked() {
	close(q.wake)
	q.wake = make(chan struct{})
}

type memSource struct{ q *Memory }

func (s memSource) Fetch(ctx context.Context, n int) ([]handoff.Delivery, error) {
	q := s.q
	if n <= 0 {
		return nil, nil
	}
	for {
		q.mu.Lock()
		now := q.clock()
		var due []*memMsg
		next := time.Time{}
		for _, m := range q.msgs {
			if !m.visible.After(now) {
				due = append(due, m)
			} else if next.IsZero() || m.visible.Before(next) {
				next = m.visible
			}
		}
		slices.SortFunc(due, func(a, b *memMsg) int { return a.id - b.id })
		var out []handoff.Delivery
		for _, m := range due[:min(n, len(due))] {
			m.attempt++
			m.lease++
			m.visible = now.Add(q.redelivery)
			out = append(out, &memDelivery{q: q, id: m.id, lease: m.lease, attempt: m.attempt, m: m.m})
		}
		wake := q.wake
		q.mu.Unlock()
		if len(out) > 0 || ctx.Err() != nil {
			return out, nil
		}
		var timer <-chan time.Time
		if !next.IsZero() {
			t := time.NewTimer(next.Sub(now))
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-wake:
		case <-timer:
		}
	}
}

// errLeaseLost is the answer to Retry and DeadLetter of a delivery whose
// message was delivered again since (its timeout passed) or ended.
var errLeaseLost = errors.New("handofftest: the delivery timed out and the message was delivered again, or it ended")

type memDelivery struct {
	q       *Memory
	id      int
	lease   int
	attempt int
	m       handoff.Message
}

func (d *memDelivery) Message() handoff.Message { return d.m }
func (d *memDelivery) Attempt() int             { return d.attempt }

// Ack removes the message; a repeat, or an Ack after the message was
// delivered again, is nil too (the message's order is settled either way).
func (d *memDelivery) Ack(ctx context.Context) error {
	d.q.mu.Lock()
	delete(d.q.msgs, d.id)
	d.q.mu.Unlock()
	return ctx.Err()
}

func (d *memDelivery) Retry(ctx context.Context, delay time.Duration) error {
	q := d.q
	q.mu.Lock()
	defer q.mu.Unlock()
	m, ok := q.msgs[d.id]
	if !ok || m.lease != d.lease {
		return errLeaseLost
	}
	m.lease++ // this delivery is over
	m.visible = q.clock().Add(max(delay, 0))
	q.notifyLocked()
	return nil
}

func (d *memDelivery) DeadLetter(ctx context.Context, reason error) error {
	q := d.q
	q.mu.Lock()
	defer q.mu.Unlock()
	m, ok := q.msgs[d.id]
	if !ok || m.lease != d.lease {
		return errLeaseLost
	}
	delete(q.msgs, d.id)
	why := ""
	if reason != nil {
		why = reason.Error()
	}
	q.dead = append(q.dead, DeadLetter{Message: m.m, Reason: why})
	return nil
}
