package redisstock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// takeHold holds the n-th command or pipeline (counted from 1) that
// carries a script call match accepts: the take of one order ID
// (holdTake), or a call with a given argument (holdArg). Everything else
// passes, so Confirm, Revert, RevertItems, ExtendHold, readers and the
// reclaimer run while the call waits.
type takeHold struct {
	what  string // for the failure message
	match func(redis.Cmder) bool
	nth   int

	mu      sync.Mutex
	seen    int
	held    chan struct{} // closed when the call is held
	release chan struct{} // closed to let it go
}

func holdCall(c redis.UniversalClient, what string, match func(redis.Cmder) bool, nth int) *takeHold {
	h := &takeHold{what: what, match: match, nth: nth, held: make(chan struct{}), release: make(chan struct{})}
	c.AddHook(h)
	return h
}

// holdTake holds the n-th take of an order ID: a deduct script call
// (stock_deduct.lua or stock_deduct_hot.lua) naming the order, its order
// ID already bound.
func holdTake(c redis.UniversalClient, order string, nth int) *takeHold {
	return holdCall(c, "the take of "+order, func(cmd redis.Cmder) bool { return isTake(cmd) && hasArg(cmd, order) }, nth)
}

// holdArg holds the first script call (EVAL or EVALSHA) with arg among
// its arguments.
func holdArg(c redis.UniversalClient, arg string) *takeHold {
	return holdCall(c, fmt.Sprintf("a script call with %q", arg), func(cmd redis.Cmder) bool {
		n := cmd.Name()
		return (n == "evalsha" || n == "eval") && hasArg(cmd, arg)
	}, 1)
}

// hasArg reports whether arg is among cmd's arguments after its name and
// first argument.
func hasArg(cmd redis.Cmder, arg string) bool {
	for _, a := range cmd.Args()[2:] {
		if s, ok := a.(string); ok && s == arg {
			return true
		}
	}
	return false
}

func (h *takeHold) wait(cmds []redis.Cmder) {
	if !slices.ContainsFunc(cmds, h.match) {
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
		t.Fatalf("%s was never sent", h.what)
	}
}

func (h *takeHold) let() { close(h.release) }
