package limiter_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/limiter"
)

// endingCtx is a caller's context whose deadline ends when the test says
// so: no timer plays a part.
type endingCtx struct {
	context.Context
	cause error // context.DeadlineExceeded or context.Canceled
	done  chan struct{}
	ended atomic.Bool
}

func newEndingCtx(cause error) *endingCtx {
	return &endingCtx{Context: bg, cause: cause, done: make(chan struct{})}
}

func (c *endingCtx) end() {
	if c.ended.CompareAndSwap(false, true) {
		close(c.done)
	}
}

func (c *endingCtx) Done() <-chan struct{} { return c.done }

func (c *endingCtx) Err() error {
	if c.ended.Load() {
		return c.cause
	}
	return nil
}

// lateScripter is a healthy Redis whose replies reach a caller with an
// endingCtx after that caller's context ended: the script runs, then the
// context ends and the call returns the context's error (as go-redis does
// when the context ends while it waits). Calls with any other context are
// answered; answered counts the replies without an error.
type lateScripter struct {
	redis.Scripter
	answered, late atomic.Int32
}

func (s *lateScripter) reply(ctx context.Context, cmd *redis.Cmd) *redis.Cmd {
	c, ok := ctx.(*endingCtx)
	if !ok {
		if cmd.Err() == nil {
			s.answered.Add(1)
		}
		return cmd
	}
	s.late.Add(1)
	c.end()
	out := redis.NewCmd(ctx)
	out.SetErr(ctx.Err())
	return out
}

func (s *lateScripter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return s.reply(ctx, s.Scripter.EvalSha(bg, sha, keys, args...))
}

func (s *lateScripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return s.reply(ctx, s.Scripter.Eval(bg, script, keys, args...))
}

// deadlineCase is a Redis or a Composite on a lateScripter, under a
// FailOpen Policy with a one-minute Backoff on a manual clock.
type deadlineCase struct {
	s     *lateScripter
	clock *manualClock
	told  *atomic.Int32
	allow func(context.Context) (limiter.Decision, error)
}

func deadlineCases(deadlineFailures int) map[string]func(t *testing.T) deadlineCase {
	setup := func(t *testing.T) (deadlineCase, limiter.Policy) {
		_, rdb := newMini(t)
		c := deadlineCase{s: &lateScripter{Scripter: rdb}, clock: newManualClock(), told: new(atomic.Int32)}
		return c, limiter.Policy{
			OnError: limiter.FailOpen, Backoff: time.Minute, Clock: c.clock,
			OnRedisError:     func(error) { c.told.Add(1) },
			DeadlineFailures: deadlineFailures,
		}
	}
	return map[string]func(t *testing.T) deadlineCase{
		"Redis": func(t *testing.T) deadlineCase {
			c, p := setup(t)
			l := newRedis(t, c.s, limiter.RedisConfig{Limit: limiter.PerSecond(1000), Policy: p})
			c.allow = func(ctx context.Context) (limiter.Decision, error) { return l.Allow(ctx, "k") }
			return c
		},
		"Composite": func(t *testing.T) deadlineCase {
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

// impatient makes a call whose context ends (cause) before Redis's reply
// reaches it, and checks it gets no decision and its context's error.
func (c deadlineCase) impatient(t *testing.T, cause error) {
	t.Helper()
	late := c.s.late.Load()
	d, err := c.allow(newEndingCtx(cause))
	if d.Allowed || d.Degraded || !errors.Is(err, cause) {
		t.Fatalf("a call whose context ended (%v) before Redis's reply: %+v, %v; want no decision, an error matching its context's", cause, d, err)
	}
	if c.s.late.Load() != late+1 {
		t.Fatalf("the call whose context ended did not ask Redis")
	}
}

// normal makes a call without a deadline and checks that Redis decided it.
func (c deadlineCase) normal(t *testing.T) {
	t.Helper()
	answered := c.s.answered.Load()
	d, err := c.allow(bg)
	if err != nil || !d.Allowed || d.Degraded || c.s.answered.Load() != answered+1 {
		t.Fatalf("a normal call: %+v, %v, Redis asked %v; want Redis's decision (no Backoff)", d, err, c.s.answered.Load() == answered+1)
	}
}

// inBackoff makes a call without a deadline and checks that FailOpen
// decided it without Redis.
func (c deadlineCase) inBackoff(t *testing.T) {
	t.Helper()
	answered, late := c.s.answered.Load(), c.s.late.Load()
	d, err := c.allow(bg)
	if err != nil || !d.Allowed || !d.Degraded || c.s.answered.Load() != answered || c.s.late.Load() != late {
		t.Fatalf("a call within the Backoff: %+v, %v; want FailOpen's decision (Allowed, Degraded) without Redis", d, err)
	}
}

func (c deadlineCase) wantTold(t *testing.T, n int32) {
	t.Helper()
	if got := c.told.Load(); got != n {
		t.Fatalf("OnRedisError told %d times, want %d", got, n)
	}
}

// One caller whose deadline ends before a healthy Redis's reply reaches it
// does not put the others into the Backoff (Policy.DeadlineFailures): the
// next normal call asks Redis, and OnRedisError is not told. With a Redis
// reply between them, such callers never start it.
func TestImpatientCallerOnHealthyRedisStartsNoBackoff(t *testing.T) {
	for name, setup := range deadlineCases(0) {
		t.Run(name, func(t *testing.T) {
			c := setup(t)
			c.normal(t)
			for range 10 {
				c.impatient(t, context.DeadlineExceeded)
				c.normal(t)
			}
			c.wantTold(t, 0)
		})
	}
}

// Policy.DeadlineFailures, default 3: the third call in a row ended by its
// deadline before Redis answered starts the Backoff and is told to
// OnRedisError, not the second; each such ending after it, until Redis
// answers, starts it again.
func TestDeadlineFailuresCountExactly(t *testing.T) {
	for name, setup := range deadlineCases(0) {
		t.Run(name, func(t *testing.T) {
			c := setup(t)
			c.normal(t)
			c.impatient(t, context.DeadlineExceeded)
			c.impatient(t, context.DeadlineExceeded)
			c.wantTold(t, 0)
			c.impatient(t, context.DeadlineExceeded) // asks Redis: no Backoff after two
			c.wantTold(t, 1)
			c.inBackoff(t)
			c.clock.Advance(time.Minute)
			c.impatient(t, context.DeadlineExceeded) // the fourth in a row
			c.wantTold(t, 2)
			c.inBackoff(t)
			c.clock.Advance(time.Minute)
			c.normal(t)
			c.wantTold(t, 2)
		})
	}
}

// A Redis reply ends the run: two calls ended by their deadline, a call
// Redis answers, and two more start no Backoff.
func TestRedisReplyResetsDeadlineFailures(t *testing.T) {
	for name, setup := range deadlineCases(0) {
		t.Run(name, func(t *testing.T) {
			c := setup(t)
			for range 3 {
				c.impatient(t, context.DeadlineExceeded)
				c.impatient(t, context.DeadlineExceeded)
				c.normal(t)
			}
			c.wantTold(t, 0)
		})
	}
}

// Cancellation is never counted as a Redis failure, however many calls in
// a row end by it.
func TestCanceledCallsNeverStartTheBackoff(t *testing.T) {
	for name, setup := range deadlineCases(0) {
		t.Run(name, func(t *testing.T) {
			c := setup(t)
			for range 10 {
				c.impatient(t, context.Canceled)
			}
			c.normal(t)
			c.wantTold(t, 0)
		})
	}
}

// Policy.DeadlineFailures 1 makes each call ended by its deadline a Redis
// failure; a negative value makes none.
func TestDeadlineFailuresSetting(t *testing.T) {
	for name, setup := range deadlineCases(1) {
		t.Run("1/"+name, func(t *testing.T) {
			c := setup(t)
			c.impatient(t, context.DeadlineExceeded)
			c.wantTold(t, 1)
			c.inBackoff(t)
		})
	}
	for name, setup := range deadlineCases(-1) {
		t.Run("-1/"+name, func(t *testing.T) {
			c := setup(t)
			for range 10 {
				c.impatient(t, context.DeadlineExceeded)
			}
			c.wantTold(t, 0)
			c.normal(t)
		})
	}
}
