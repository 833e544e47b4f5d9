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

var errDown = errors.New("dial tcp: connection refused")

// flakyScripter fails every call while down is set, and counts calls.
type flakyScripter struct {
	redis.Scripter
	down  atomic.Bool
	calls atomic.Int64
}

func (f *flakyScripter) fail(ctx context.Context) *redis.Cmd {
	f.calls.Add(1)
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(errDown)
	return cmd
}

func (f *flakyScripter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if f.down.Load() {
		return f.fail(ctx)
	}
	f.calls.Add(1)
	return f.Scripter.EvalSha(ctx, sha, keys, args...)
}

func (f *flakyScripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	if f.down.Load() {
		return f.fail(ctx)
	}
	return f.Scripter.Eval(ctx, script, keys, args...)
}

func newFlaky(t *testing.T) *flakyScripter {
	_, rdb := newMini(t)
	f := &flakyScripter{Scripter: rdb}
	f.down.Store(true)
	return f
}

func TestPolicyReturnErrorAndBackoff(t *testing.T) {
	f := newFlaky(t)
	clock := newManualClock()
	var reported atomic.Int64
	l := newRedis(t, f, limiter.RedisConfig{Limit: limiter.PerSecond(10), Policy: limiter.Policy{
		Clock: clock, OnRedisError: func(error) { reported.Add(1) },
	}})
	_, err := l.Allow(bg, "k")
	var rerr *limiter.RedisError
	if !errors.As(err, &rerr) || !errors.Is(err, errDown) || !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("error = %v, want a *RedisError wrapping the client's error", err)
	}
	// Within the backoff, Redis is not called.
	for range 10 {
		if _, err := l.Allow(bg, "k"); !errors.Is(err, limiter.ErrUnavailable) {
			t.Fatalf("error in backoff = %v, want ErrUnavailable", err)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("Redis called %d times, want 1 (the backoff skips it)", n)
	}
	if n := reported.Load(); n != 1 {
		t.Fatalf("OnRedisError told %d times, want 1", n)
	}
	f.down.Store(false)
	clock.Advance(100 * time.Millisecond)
	if d, err := l.Allow(bg, "k"); err != nil || !d.Allowed || d.Degraded {
		t.Fatalf("after the backoff with Redis back = %+v, %v; want a normal decision", d, err)
	}
}

func TestPolicyFailOpenAndClosed(t *testing.T) {
	for _, tc := range []struct {
		mode    limiter.ErrorMode
		allowed bool
	}{{limiter.FailOpen, true}, {limiter.FailClosed, false}} {
		f := newFlaky(t)
		l := newRedis(t, f, limiter.RedisConfig{Limit: limiter.PerSecond(1), Policy: limiter.Policy{OnError: tc.mode, Backoff: -1}})
		for range 3 {
			d, err := l.Allow(bg, "k")
			if err != nil || d.Allowed != tc.allowed || !d.Degraded {
				t.Fatalf("mode %d with Redis down = %+v, %v; want Allowed %v, Degraded", tc.mode, d, err, tc.allowed)
			}
		}
		if n := f.calls.Load(); n != 3 {
			t.Fatalf("Redis called %d times with a negative Backoff, want 3", n)
		}
		// Cancellation is an error, never a policy decision.
		ctx, cancel := context.WithCancel(bg)
		cancel()
		if _, err := l.Allow(ctx, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled call error = %v, want context.Canceled", err)
		}
	}
}

// While Redis is down, a local limiter still turns floods away.
func TestPolicyFallbackLimits(t *testing.T) {
	f := newFlaky(t)
	clock := newManualClock()
	local, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Period: time.Hour, Burst: 2}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	c := newComposite(t, f, limiter.CompositeConfig{
		Dimensions: []limiter.Dimension{{Name: "user", Limit: limiter.PerSecond(100)}, {Name: "ip", Limit: limiter.PerSecond(100)}},
		Policy:     limiter.Policy{Fallback: local, Clock: clock},
	})
	req := limiter.Request{Tag: "t", Values: []string{"u1", "10.0.0.1"}}
	for i := range 2 {
		if d, err := c.Allow(bg, req); err != nil || !d.Allowed || !d.Degraded {
			t.Fatalf("call %d on the fallback = %+v, %v; want allowed, degraded", i, d, err)
		}
	}
	d, err := c.Allow(bg, req)
	if err != nil || d.Allowed || !d.Degraded || d.DeniedBy != "user" {
		t.Fatalf("third call on the fallback = %+v, %v; want denied by user, degraded", d, err)
	}
	// The fallback counts each dimension on its own key.
	if d, _ := c.Allow(bg, limiter.Request{Tag: "t", Values: []string{"u2", "10.0.0.1"}}); d.Allowed || d.DeniedBy != "ip" {
		t.Fatalf("other user, same IP = %+v, want denied by ip", d)
	}
}

func TestPolicyBypassCountsNothing(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			c := newComposite(t, b.client(t), limiter.CompositeConfig{
				Dimensions: []limiter.Dimension{{Name: "user", Limit: limiter.PerMinute(1)}, {Name: "ip", Limit: limiter.PerMinute(1)}},
				Policy:     limiter.Policy{Bypass: func(k string) bool { return k == "user:staff" }},
			})
			for range 5 {
				d, err := c.Allow(bg, limiter.Request{Tag: "t", Values: []string{"staff", "10.0.0.9"}})
				if err != nil || !d.Allowed || !d.Bypassed {
					t.Fatalf("allowlisted user = %+v, %v; want allowed, bypassed", d, err)
				}
			}
			if d, err := c.Allow(bg, limiter.Request{Tag: "t", Values: []string{"bob", "10.0.0.9"}}); err != nil || !d.Allowed || d.Bypassed {
				t.Fatalf("bob from the same IP = %+v, %v; want allowed (bypassed calls took nothing)", d, err)
			}
		})
	}
}
