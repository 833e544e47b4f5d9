package redisstock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// takeHold holds the take of one order ID: the n-th command or pipeline
// that carries a deduct script (stock_deduct.lua or stock_deduct_hot.lua)
// naming the order, counted from 1. Everything else passes, so Confirm,
// Revert, RevertItems, ExtendHold, readers and the reclaimer run while the
// take waits, its order ID already bound.
type takeHold struct {
	order string
	nth   int

	mu      sync.Mutex
	seen    int
	held    chan struct{} // closed when the take is held
	release chan struct{} // closed to let it go
}

func holdTake(c redis.UniversalClient, order string, nth int) *takeHold {
	h := &takeHold{order: order, nth: nth, held: make(chan struct{}), release: make(chan struct{})}
	c.AddHook(h)
	return h
}

// isTake reports whether cmd runs a deduct script with the order ID among
// its arguments.
func (h *takeHold) isTake(cmd redis.Cmder) bool {
	if !isTake(cmd) {
		return false
	}
	for _, a := range cmd.Args()[2:] {
		if s, ok := a.(string); ok && s == h.order {
			return true
		}
	}
	return false
}

func (h *takeHold) wait(cmds []redis.Cmder) {
	take := false
	for _, c := range cmds {
		take = take || h.isTake(c)
	}
	if !take {
		return
	}
	h.mu.Lock()
	h.seen++
	hit := h.seen == h.nth
	h.mu.Unlock()
	if hit {
		close(h.held)
		<-h.release
	}
}

func (h *takeHold) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *takeHold) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.wait([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *takeHold) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.wait(cmds)
		return next(ctx, cmds)
	}
}

// heldNow waits until the take is held (the test fails after 10s).
func (h *takeHold) heldNow(t *testing.T) {
	t.Helper()
	select {
	case <-h.held:
	case <-time.After(10 * time.Second):
		t.Fatalf("the take of %s was never sent", h.order)
	}
}

func (h *takeHold) let() { close(h.release) }
