package limiter_test

import (
	"errors"
	"testing"

	"github.com/stockguard/stockguard/limiter"
)

// A Fallback with a tighter burst than the Redis limit (as Policy.Fallback
// recommends) refuses an n it can never admit (a degraded refusal); the
// caller's n, valid for the limiter called, is not reported as invalid.
func TestFallbackRefusesNAboveItsBurst(t *testing.T) {
	f := newFlaky(t)
	clock := newManualClock()
	local, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.PerSecond(5), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	l := newRedis(t, f, limiter.RedisConfig{Limit: limiter.PerSecond(10), Policy: limiter.Policy{Fallback: local, Clock: clock}})
	d, err := l.AllowN(bg, "k", 8) // 8 <= Burst 10: valid for this limiter
	if errors.Is(err, limiter.ErrInvalid) {
		t.Fatalf("AllowN(8) on a Burst-10 limiter with Redis down = %v; want a degraded refusal, not ErrInvalid", err)
	}
	if err != nil || d.Allowed || !d.Degraded {
		t.Fatalf("AllowN(8) with Redis down = %+v, %v; want refused, degraded", d, err)
	}
	if d.RetryAfter <= 0 || d.ResetAfter < d.RetryAfter {
		t.Fatalf("AllowN(8) with Redis down = %+v; want RetryAfter > 0 and ResetAfter >= RetryAfter", d)
	}
	// Nothing was counted: the Fallback's whole burst is still there.
	if d, err := l.AllowN(bg, "k", 5); err != nil || !d.Allowed || !d.Degraded {
		t.Fatalf("AllowN(5) after the refusal = %+v, %v; want allowed by the Fallback", d, err)
	}
}
