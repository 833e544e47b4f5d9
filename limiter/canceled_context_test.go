package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

// A Redis-backed limiter's call on an ended context returns an error
// matching ctx.Err() and counts nothing, also within the Backoff, where
// Redis is not called and the Fallback or OnError mode would decide.
func TestCanceledContextIsAnErrorInBackoff(t *testing.T) {
	canceled, cancel := context.WithCancel(bg)
	cancel()
	t.Run("FailOpen", func(t *testing.T) {
		f := newFlaky(t)
		clock := newManualClock()
		l := newRedis(t, f, limiter.RedisConfig{Limit: limiter.PerSecond(10), Policy: limiter.Policy{OnError: limiter.FailOpen, Clock: clock}})
		if d, err := l.Allow(bg, "k"); err != nil || !d.Degraded {
			t.Fatalf("first call with Redis down = %+v, %v", d, err)
		}
		d, err := l.Allow(canceled, "k") // within the 100 ms backoff
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled call within the backoff = %+v, %v; want an error matching context.Canceled", d, err)
		}
	})
	t.Run("Fallback", func(t *testing.T) {
		f := newFlaky(t)
		clock := newManualClock()
		local, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Period: time.Hour, Burst: 2}, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		l := newRedis(t, f, limiter.RedisConfig{Limit: limiter.PerSecond(10), Policy: limiter.Policy{Fallback: local, Clock: clock}})
		if d, err := l.Allow(bg, "k"); err != nil || !d.Allowed || !d.Degraded {
			t.Fatalf("first call with Redis down = %+v, %v", d, err)
		}
		d, err := l.Allow(canceled, "k")
		if !errors.Is(err, context.Canceled) {
			t.Errorf("canceled call within the backoff = %+v, %v; want an error matching context.Canceled", d, err)
		}
		if d, err := l.Allow(bg, "k"); err != nil || !d.Allowed {
			t.Errorf("second live call = %+v, %v; want allowed (burst 2): the canceled call took a fallback token", d, err)
		}
	})
}
