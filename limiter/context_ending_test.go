package limiter_test

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/limiter"
)

// endsDuringCall is a caller's context that ends while its call waits for
// Redis: by its deadline (which has passed by the time the client returns,
// while Err is still nil, as when a read that times out at the caller's
// deadline returns before the context's timer fires), or by cancellation.
type endsDuringCall struct {
	context.Context
	byDeadline bool
	reply      error // what the client returns to the call
	called     atomic.Bool
}

func (c *endsDuringCall) Deadline() (time.Time, bool) {
	if c.byDeadline && c.called.Load() {
		return time.Now().Add(-time.Millisecond), true
	}
	if c.byDeadline {
		return time.Now().Add(time.Hour), true
	}
	return time.Time{}, false
}

func (c *endsDuringCall) Err() error {
	if !c.byDeadline && c.called.Load() {
		return context.Canceled
	}
	return nil
}

// endingScripter answers calls with an endsDuringCall context with that
// context's reply, after ending it; other calls reach Redis.
type endingScripter struct {
	redis.Scripter
	answered atomic.Int32
}

func (s *endingScripter) reply(ctx context.Context, run func() *redis.Cmd) *redis.Cmd {
	c, ok := ctx.(*endsDuringCall)
	if !ok {
		cmd := run()
		if cmd.Err() == nil {
			s.answered.Add(1)
		}
		return cmd
	}
	c.called.Store(true)
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(c.reply)
	return cmd
}

func (s *endingScripter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return s.reply(ctx, func() *redis.Cmd { return s.Scripter.EvalSha(ctx, sha, keys, args...) })
}

func (s *endingScripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return s.reply(ctx, func() *redis.Cmd { return s.Scripter.Eval(ctx, script, keys, args...) })
}

// errorReply is an error reply from the server (a redis.Error).
type errorReply string

func (e errorReply) Error() string { return string(e) }
func (errorReply) RedisError()     {}

// readTimeout is the client's error when its read times out.
var readTimeout error = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

type endingCase struct {
	s     *endingScripter
	clock *manualClock
	told  *atomic.Int32
	allow func(context.Context) (limiter.Decision, error)
}

func endingCases() map[string]func(t *testing.T) endingCase {
	setup := func(t *testing.T) (endingCase, limiter.Policy) {
		_, rdb := newMini(t)
		c := endingCase{s: &endingScripter{Scripter: rdb}, clock: newManualClock(), told: new(atomic.Int32)}
		return c, limiter.Policy{
			OnError: limiter.FailOpen, Backoff: time.Minute, Clock: c.clock,
			OnRedisError: func(error) { c.told.Add(1) },
		}
	}
	return map[string]func(t *testing.T) endingCase{
		"Redis": func(t *testing.T) endingCase {
			c, p := setup(t)
			l := newRedis(t, c.s, limiter.RedisConfig{Limit: limiter.PerSecond(1000), Policy: p})
			c.allow = func(ctx context.Context) (limiter.Decision, error) { return l.Allow(ctx, "k") }
			return c
		},
		"Composite": func(t *testing.T) endingCase {
			c, p := setup(t)
			cl := newComposite(t, c.s, limiter.CompositeConfig{
				Dimensions: []limiter.Dimension{{Name: "user", Limit: limiter.PerSecond(1000)}, {Name: "sku", Limit: limiter.PerSecond(1000)}},
				Policy:     p,
			})
			c.allow = func(ctx context.Context) (limiter.Decision, error) {
				return cl.Allow(ctx, limiter.Request{Tag: "u1", Values: []string{"u1", "sku1"}})
			}
			return c
		},
	}
}

// ended makes a call whose context ends while it waits, the client
// returning reply, and checks it gets no decision and an error matching
// its context's ending and the client's error.
func (c endingCase) ended(t *testing.T, byDeadline bool, reply error) {
	t.Helper()
	want := context.Canceled
	if byDeadline {
		want = context.DeadlineExceeded
	}
	d, err := c.allow(&endsDuringCall{Context: bg, byDeadline: byDeadline, reply: reply})
	if d.Allowed || d.Degraded || !errors.Is(err, want) || !errors.Is(err, reply) {
		t.Fatalf("a call whose context ended (%v) while it waited, the client returning %v: %+v, %v; want no decision, an error matching %v and the client's error", want, reply, d, err, want)
	}
}

func (c endingCase) normal(t *testing.T) {
	t.Helper()
	answered := c.s.answered.Load()
	d, err := c.allow(bg)
	if err != nil || !d.Allowed || d.Degraded || c.s.answered.Load() != answered+1 {
		t.Fatalf("a normal call: %+v, %v; want Redis's decision (no Backoff)", d, err)
	}
}

func (c endingCase) wantTold(t *testing.T, n int32) {
	t.Helper()
	if got := c.told.Load(); got != n {
		t.Fatalf("OnRedisError told %d times, want %d", got, n)
	}
}

// Policy: a call that fails after its deadline has passed ended by its
// caller "whatever error the client returned", also before ctx.Err() is
// set: a read timeout at the caller's deadline gets no policy decision and
// an error matching context.DeadlineExceeded, and counts toward
// DeadlineFailures (default 3) instead of starting the Backoff at once.
func TestReadTimeoutPastTheCallersDeadlineIsTheCallersEnding(t *testing.T) {
	for name, setup := range endingCases() {
		t.Run(name, func(t *testing.T) {
			c := setup(t)
			c.normal(t)
			c.ended(t, true, readTimeout)
			c.wantTold(t, 0)
			c.normal(t) // a reply: the run starts again
			c.ended(t, true, readTimeout)
			c.ended(t, true, readTimeout)
			c.wantTold(t, 0)
			c.ended(t, true, readTimeout)
			c.wantTold(t, 1)
			d, err := c.allow(bg)
			if err != nil || !d.Allowed || !d.Degraded {
				t.Fatalf("the call after three read timeouts past the deadline: %+v, %v; want FailOpen's decision in the Backoff", d, err)
			}
		})
	}
}

// Policy.DeadlineFailures: "A call ended by cancellation (context.Canceled)
// never counts", whatever error the client returned: a read timeout met by
// a canceled call starts no Backoff.
func TestReadTimeoutOfACanceledCallNeverStartsTheBackoff(t *testing.T) {
	for name, setup := range endingCases() {
		t.Run(name, func(t *testing.T) {
			c := setup(t)
			for range 5 {
				c.ended(t, false, readTimeout)
			}
			c.wantTold(t, 0)
			c.normal(t)
		})
	}
}

// Policy.DeadlineFailures: "Any reply from Redis ends the run: ... an
// error reply (redis.Error) ..., also one that reaches a call after its
// deadline (that call does not count)". Two endings by deadline, an error
// reply reaching a call past its deadline, then two more endings: no
// Backoff; a third ending after the reply starts it.
func TestErrorReplyPastTheDeadlineEndsTheRunUncounted(t *testing.T) {
	for name, setup := range endingCases() {
		t.Run(name, func(t *testing.T) {
			c := setup(t)
			c.ended(t, true, readTimeout)
			c.ended(t, true, readTimeout)
			c.ended(t, true, errorReply("ERR something went wrong"))
			c.ended(t, true, readTimeout)
			c.ended(t, true, readTimeout)
			c.wantTold(t, 0)
			c.normal(t)
			c.ended(t, true, readTimeout)
			c.ended(t, true, readTimeout)
			c.ended(t, true, readTimeout)
			c.wantTold(t, 1)
		})
	}
}
