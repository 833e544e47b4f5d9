package redisstream_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/stock"
)

// failFirstScript fails the first script call (EVALSHA/EVAL) with a
// transient error, as a timeout on a busy Redis would.
type failFirstScript struct{ failed atomic.Bool }

func (h *failFirstScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failFirstScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := strings.ToLower(cmd.Name())
		if (name == "evalsha" || name == "eval") && h.failed.CompareAndSwap(false, true) {
			err := errors.New("i/o timeout (transient)")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (h *failFirstScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// recordingSettler records the orders it settled and stops the run once
// the first is.
type recordingSettler struct {
	settled atomic.Int64
	stop    context.CancelFunc
}

func (s *recordingSettler) Settle(context.Context, stock.Order) error {
	s.settled.Add(1)
	s.stop()
	return nil
}

// A Fetch that read a new message (XREADGROUP: now pending for this
// consumer) and then met a transient error in its sweep returns both the
// delivery and the error, and Run settles the delivery at once: it does
// not wait out the Redelivery timeout (here an hour) in the consumer's
// hands.
func TestRunSettlesTheDeliveriesOfAFetchThatFailed(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: "fetch-error-orders", Redelivery: time.Hour, Block: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m := handoff.Message{Order: stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}, Sent: time.Now()}
	if err := q.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	rdb.AddHook(&failFirstScript{})
	// The bound of the run: the message is in the consumer's hands from
	// its first Fetch, so it must be settled long before; nothing else
	// could deliver it again within Redelivery (an hour).
	runCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s := &recordingSettler{stop: cancel}
	c, err := handoff.NewConsumer(q.Source("c1"), s, handoff.ConsumerConfig{Backoff: 10 * time.Millisecond, Poll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Run(runCtx)
	if s.settled.Load() == 0 {
		n, _ := q.Len(ctx)
		pending, _ := rdb.XPending(ctx, "{fetch-error-orders}", "stockguard").Result()
		t.Fatalf("order o1 not settled within 5s of Run (queue len %d, pending for consumers %v): the delivery its first Fetch returned with the sweep's error was dropped, and waits for the 1h Redelivery", n, pending.Consumers)
	}
}
