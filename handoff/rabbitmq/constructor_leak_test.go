package rabbitmq_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff/rabbitmq"
	"github.com/stockguard/stockguard/internal/testdb"
)

// settledGoroutines is the number of goroutines once the count settles.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

// A bad Config is a clear error and nothing else: NewPublisher and
// NewSource that fail return nothing the caller could Close, so they
// must not leave the connection they opened behind. A queue of the
// Config's name that exists with other arguments (a classic queue, a
// former deployment) makes the declaration fail; no failed call may
// leave an open AMQP connection (and its goroutines) behind.
func TestFailedConstructorsLeaveNoConnection(t *testing.T) {
	url := testdb.Need(t, broker)
	cfg := config(t, url, 500*time.Millisecond)
	// The hand-off's queue exists as a classic queue.
	if _, err := adminChannel(t, url).QueueDeclare(cfg.Queue, true, false, false, false, nil); err != nil {
		t.Fatalf("declare a classic queue: %v", err)
	}
	before := settledGoroutines()
	const tries = 5
	for range tries {
		if p, err := rabbitmq.NewPublisher(ctxT(t), url, cfg); err == nil {
			_ = p.Close()
			t.Fatalf("NewPublisher over a classic queue of the same name: nil error")
		}
		if s, err := rabbitmq.NewSource(ctxT(t), url, cfg); err == nil {
			_ = s.Close()
			t.Fatalf("NewSource over a classic queue of the same name: nil error")
		}
	}
	after := settledGoroutines()
	if after > before+2 {
		t.Errorf("%d goroutines before %d failed NewPublisher and NewSource calls, %d after: their connections stay open", before, 2*tries, after)
	}
}

// Close releases what a Publisher and a Source opened: no goroutine of
// theirs outlives it, even with a delivery in a Retry's delay.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	url := testdb.Need(t, broker)
	cfg := config(t, url, 500*time.Millisecond)
	before := settledGoroutines()
	pub, err := rabbitmq.NewPublisher(ctxT(t), url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := rabbitmq.NewSource(ctxT(t), url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"close-1", "close-2"} {
		if err := pub.Publish(ctxT(t), testMessage(id)); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := src.Fetch(ctxT(t), 2)
	if err != nil || len(ds) == 0 {
		t.Fatalf("Fetch: %d, %v", len(ds), err)
	}
	_ = ds[0].Ack(ctxT(t))
	_ = pub.Close()
	_ = src.Close()
	if after := settledGoroutines(); after > before+1 {
		t.Errorf("%d goroutines before, %d after Close", before, after)
	}
}
