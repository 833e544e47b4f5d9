package handofftest

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
)

// Harness is what the suite needs of an adapter.
type Harness struct {
	// New returns a fresh, empty queue of the adapter for one subtest (its
	// own stream, subject or queue name). Release what it opens with
	// t.Cleanup.
	New func(t *testing.T) Queue
	// Redelivery is the adapter's timeout: a delivery that is neither
	// acknowledged, retried nor dead-lettered is delivered again after it,
	// and not before. Keep it small in tests (a few hundred milliseconds):
	// the suite waits for it several times.
	Redelivery time.Duration
	// Deduplicates says that the broker stores a message published again
	// with the same order ID once (JetStream's Nats-Msg-Id within its
	// window): the suite then expects one message per order where an
	// order was handed off twice, instead of two.
	Deduplicates bool
}

// Queue is one queue of the adapter under test.
type Queue struct {
	// Publisher publishes to the queue.
	Publisher handoff.Publisher
	// NewSource returns a new consumer of the queue. The Sources of one
	// queue share its messages: each is delivered to one of them at a time.
	NewSource func() handoff.Source
	// DeadLetters returns the messages dead-lettered on the queue so far,
	// in the order they were dead-lettered.
	DeadLetters func(ctx context.Context) ([]DeadLetter, error)
}

// DeadLetter is one message in a queue's dead-letter destination.
type DeadLetter struct {
	Message handoff.Message
	// Reason is the text of the error the message was dead-lettered with.
	Reason string
}

// Run checks the adapter contract of package handoff, each promise in a
// subtest on a fresh queue (see the package doc for the list).
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.Redelivery <= 0 {
		t.Fatal("handofftest: Harness needs New and a positive Redelivery")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, h)
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, h Harness)
}

// cases lists every promise the suite checks; each file of the package
// adds its own through init.
var cases []testCase

func register(name string, run func(t *testing.T, h Harness)) {
	cases = append(cases, testCase{name: name, run: run})
}

// margin is the slack the suite gives a busy machine: a wait that the
// adapter bounds may take this much longer before the suite fails it.
const margin = 10 * time.Second

// early is how much earlier than promised a redelivery may come: brokers
// count time in whole milliseconds, on their own clock.
const early = 20 * time.Millisecond

// fetchOne waits up to wait for one delivery and fails the test without one.
func fetchOne(t *testing.T, src handoff.Source, wait time.Duration) handoff.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		ds, err := src.Fetch(ctx, 1)
		if err != nil {
			t.Fatalf("Fetch: %v", err)
		}
		if len(ds) > 1 {
			t.Fatalf("Fetch(ctx, 1) returned %d deliveries", len(ds))
		}
		if len(ds) == 1 {
			return ds[0]
		}
		if ctx.Err() != nil {
			t.Fatalf("no delivery within %v", wait)
		}
	}
}

// fetchNone fails the test if src delivers anything within wait.
func fetchNone(t *testing.T, src handoff.Source, wait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for ctx.Err() == nil {
		ds, err := src.Fetch(ctx, 8)
		if err != nil {
			t.Fatalf("Fetch: %v", err)
		}
		for _, d := range ds {
			t.Fatalf("delivered %s (attempt %d); want nothing", d.Message().Order.ID, d.Attempt())
		}
	}
}

// bg is a context for calls the suite expects to return promptly.
func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), margin)
	t.Cleanup(cancel)
	return ctx
}
