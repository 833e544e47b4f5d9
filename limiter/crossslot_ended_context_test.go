package limiter_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/limiter"
)

// crossSlotCancelingScripter ends the caller's context during the call,
// and the server answers CROSSSLOT.
type crossSlotCancelingScripter struct {
	redis.Scripter
	cancel context.CancelFunc
}

func (s *crossSlotCancelingScripter) reply(ctx context.Context) *redis.Cmd {
	s.cancel()
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(redis.ErrCrossSlot)
	return cmd
}

func (s *crossSlotCancelingScripter) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return s.reply(ctx)
}

func (s *crossSlotCancelingScripter) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return s.reply(ctx)
}

// limiter/doc.go: "a CROSSSLOT reply is ErrCrossSlot, never an outage for
// the Policy to decide"; ErrUnavailable is the outage's error. A call
// whose context ends while the server answers CROSSSLOT gets its
// context's error (Policy.OnError: "an error matching ctx.Err()"), and the
// reply is still the caller's ErrCrossSlot, not a *RedisError matching
// ErrUnavailable.
func TestCrossSlotReplyOnAnEndedContextIsStillErrCrossSlot(t *testing.T) {
	_, mini := newMini(t)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	c := newComposite(t, &crossSlotCancelingScripter{Scripter: mini, cancel: cancel}, limiter.CompositeConfig{
		AllowCrossSlot: true,
		Dimensions:     []limiter.Dimension{{Name: "user", Limit: limiter.PerSecond(1)}, {Name: "sku", Limit: limiter.PerSecond(1)}},
		Policy:         limiter.Policy{OnError: limiter.FailOpen, Clock: newManualClock()},
	})
	d, err := c.Allow(ctx, limiter.Request{Values: []string{"alice", "sku-1"}})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, limiter.ErrCrossSlot) || errors.Is(err, limiter.ErrUnavailable) || d.Allowed || d.Degraded {
		t.Fatalf("CROSSSLOT reply to a call whose context ended: %+v, %v (ErrCrossSlot %v, ErrUnavailable %v); want no decision, an error matching context.Canceled and ErrCrossSlot, not ErrUnavailable",
			d, err, errors.Is(err, limiter.ErrCrossSlot), errors.Is(err, limiter.ErrUnavailable))
	}
}
