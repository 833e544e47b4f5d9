package limiter_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

// NewLocal refuses a limit faster than one event per nanosecond (the
// Clock's resolution, below which a bucket cannot be enforced), and a Local
// at the fastest limit it accepts admits exactly its Burst at one instant.
func TestLocalEnforcesEveryLimitItAccepts(t *testing.T) {
	clock := newManualClock()
	_, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: limiter.MaxRate, Period: limiter.MinPeriod, Burst: 1}, Clock: clock})
	if !errors.Is(err, limiter.ErrInvalid) {
		t.Fatalf("NewLocal with %d events per %v (above one per ns) = %v; want ErrInvalid", limiter.MaxRate, limiter.MinPeriod, err)
	}
	l, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: int64(time.Millisecond), Period: time.Millisecond, Burst: 1}, Clock: clock})
	if err != nil {
		t.Fatalf("NewLocal with one event per ns = %v; want accepted", err)
	}
	allowed := 0
	for range 10_000 {
		if d, err := l.Allow(bg, "k"); err == nil && d.Allowed {
			allowed++
		}
	}
	if allowed != 1 {
		t.Fatalf("Burst 1, 10000 calls at one instant: %d allowed, want 1", allowed)
	}
}
