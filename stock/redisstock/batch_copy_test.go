package redisstock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

// turnHook holds the first two EVALSHA calls until first is closed and the
// third until third is closed. An EVAL passes: it is a call's fallback
// where the server lacks the script, not a call of its own.
type turnHook struct {
	n            atomic.Int64
	first, third chan struct{}
	arrived      chan struct{} // closed when the third call is held
}

func (h *turnHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *turnHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *turnHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			switch h.n.Add(1) {
			case 1, 2:
				<-h.first
			case 3:
				close(h.arrived)
				<-h.third
			}
		}
		return next(ctx, cmd)
	}
}

// A caller that leaves once its order is in a batch (its context ended)
// may reuse its Order's memory at once: the batch, sent later, takes the
// order as it was given.
func TestBatchTakesTheOrderAsGivenAfterItsCallerLeft(t *testing.T) {
	eachBatched(t, func(t *testing.T, fx *batchFixture) {
		fx.sale("a", 20, 0, time.Minute)
		fx.sale("b", 20, 0, time.Minute)
		if fx.mini != nil {
			// The deduct script is not on the server (as on one that ran
			// another version's): the first calls fall back to EVAL.
			if err := fx.c.ScriptFlush(fx.ctx()).Err(); err != nil {
				t.Fatal(err)
			}
		}
		h := &turnHook{first: make(chan struct{}), third: make(chan struct{}), arrived: make(chan struct{})}
		fx.c.AddHook(h)
		var wg sync.WaitGroup
		blockers := make([]error, 2)
		for i := range blockers {
			wg.Go(func() { blockers[i] = fx.s.Deduct(fx.ctx(), ord("blocker"+string(rune('0'+i)), "", it("a", 1))) })
		}
		waitFor(t, "two Deducts in flight", func() bool { return h.n.Load() == 2 })
		ctx, cancel := context.WithCancel(fx.ctx())
		o := ord("left", "u1", it("a", 3))
		done := make(chan error, 1)
		go func() { done <- fx.s.Deduct(ctx, o) }()
		waitFor(t, "a queued Deduct", func() bool { return fx.s.Queued() == 1 })
		close(h.first)
		<-h.arrived // the batch with o is sent, held before it reaches Redis
		cancel()
		if err := <-done; !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("Deduct whose context ended in flight: %v, want ErrUnknownOutcome", err)
		}
		o.Items[0] = it("b", 5) // the caller reuses its memory
		close(h.third)
		wg.Wait()
		for _, err := range blockers {
			is(t, err, nil, "blocker")
		}
		waitFor(t, "the batch to land", func() bool {
			lv, err := fx.s.Levels(fx.ctx(), "a")
			return err == nil && lv.Held == 5
		})
		fx.want("a", 15, 5, 0)
		fx.want("b", 20, 0, 0)
	})
}
