package limiter_test

import (
	"errors"
	"testing"

	"github.com/stockguard/stockguard/limiter"
)

// A Redis limiter serves as a Composite's Fallback for tagged calls too:
// the Fallback's keys are ones a Redis limiter takes, so while the primary
// Redis is down a tagged call is decided by the Fallback (Degraded), and
// a Reset of the same request succeeds.
func TestCompositeRedisFallbackDecidesTaggedCalls(t *testing.T) {
	f := newFlaky(t)
	clock := newManualClock()
	_, fbRdb := newMini(t)
	fb := newRedis(t, fbRdb, limiter.RedisConfig{Limit: limiter.PerSecond(5)})
	c := newComposite(t, f, limiter.CompositeConfig{
		Dimensions: []limiter.Dimension{{Name: "user", Limit: limiter.PerSecond(100)}},
		Policy:     limiter.Policy{Fallback: fb, Clock: clock},
	})
	req := limiter.Request{Tag: "sale", Values: []string{"u1"}}
	d, err := c.Allow(bg, req)
	if err != nil || !d.Allowed || !d.Degraded {
		t.Errorf("tagged call with Redis down and a *Redis Fallback = %+v, %v (ErrInvalid: %v); want allowed by the Fallback, degraded",
			d, err, errors.Is(err, limiter.ErrInvalid))
	}
	f.down.Store(false)
	if err := c.Reset(bg, req); err != nil {
		t.Errorf("Reset of a valid tagged request with a *Redis Fallback = %v; want nil", err)
	}
}
