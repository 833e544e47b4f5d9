package limiter_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

// A Composite value of MaxKeyLen bytes is valid input whether Redis is up
// or down: while Redis is down the Fallback decides the call (it is not
// refused as invalid, and no dimension counts for a call that fails), and
// Reset of the same request succeeds.
func TestFallbackDecidesLongValues(t *testing.T) {
	f := newFlaky(t)
	f.down.Store(false)
	clock := newManualClock()
	local, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Period: time.Hour, Burst: 1}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	c := newComposite(t, f, limiter.CompositeConfig{
		Dimensions: []limiter.Dimension{{Name: "user", Limit: limiter.PerSecond(100)}, {Name: "sku", Limit: limiter.PerSecond(100)}},
		Policy:     limiter.Policy{Fallback: local, Clock: clock},
	})
	longSKU := strings.Repeat("s", limiter.MaxKeyLen)
	req := limiter.Request{Tag: "sale", Values: []string{"u1", longSKU}}
	if d, err := c.Allow(bg, req); err != nil || !d.Allowed {
		t.Fatalf("with Redis up, a %d-byte value = %+v, %v; want allowed (it is valid input)", len(longSKU), d, err)
	}

	f.down.Store(true)
	d, err := c.Allow(bg, req)
	if errors.Is(err, limiter.ErrInvalid) {
		t.Errorf("with Redis down, the same valid request = %v; want a Fallback decision, not ErrInvalid", err)
	} else if err != nil || !d.Allowed || !d.Degraded {
		t.Errorf("with Redis down, the same valid request = %+v, %v; want allowed by the Fallback, degraded", d, err)
	}
	// A call that returned an error must not have taken u1's only fallback token.
	if err != nil {
		d, err2 := c.Allow(bg, limiter.Request{Tag: "sale", Values: []string{"u1", ""}})
		if err2 != nil || !d.Allowed {
			t.Errorf("u1 after a call that returned an error = %+v, %v; want allowed: the erroring call counted on user:u1 (a partial write)", d, err2)
		}
	}

	f.down.Store(false)
	if err := c.Reset(bg, req); err != nil {
		t.Errorf("Reset of a valid request = %v; want nil", err)
	}
}

// The tag is part of each counter's identity in the Fallback too: while
// Redis is down, calls with different tags (here per-user user+SKU
// counters, tagged by user) count on different Fallback counters.
func TestFallbackKeepsTagsApart(t *testing.T) {
	f := newFlaky(t)
	clock := newManualClock()
	local, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: 2, Period: time.Minute}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	c := newComposite(t, f, limiter.CompositeConfig{
		Dimensions: []limiter.Dimension{
			{Name: "user", Limit: limiter.PerMinute(10)}, // per user
			{Name: "sku", Limit: limiter.PerMinute(2)},   // per user and SKU (tagged by user)
		},
		Policy: limiter.Policy{Fallback: local, Clock: clock},
	})
	buy := func(user string) limiter.Decision {
		t.Helper()
		d, err := c.Allow(bg, limiter.Request{Tag: user, Values: []string{user, "phone"}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for range 2 {
		if d := buy("alice"); !d.Allowed {
			t.Fatalf("alice's call on the fallback = %+v, want allowed", d)
		}
	}
	if d := buy("bob"); !d.Allowed {
		t.Fatalf("bob's first call for phone (tag bob) with Redis down = %+v; want allowed: alice's calls (tag alice) counted in bob's user+SKU counter", d)
	}
}

// Composite.Reset clears in the Fallback only the counters of the Request's
// tag: resetting one user's user+SKU count leaves another user's count for
// that SKU as it was.
func TestFallbackResetKeepsTagsApart(t *testing.T) {
	f := newFlaky(t)
	clock := newManualClock()
	local, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: 2, Period: time.Minute}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	c := newComposite(t, f, limiter.CompositeConfig{
		Dimensions: []limiter.Dimension{{Name: "sku", Limit: limiter.PerMinute(2)}}, // per user and SKU (tagged by user)
		Policy:     limiter.Policy{Fallback: local, Clock: clock, Backoff: time.Hour},
	})
	bob := limiter.Request{Tag: "bob", Values: []string{"phone"}}
	for range 2 {
		if d, err := c.Allow(bg, bob); err != nil || !d.Allowed {
			t.Fatalf("bob's call on the fallback = %+v, %v; want allowed", d, err)
		}
	}
	f.down.Store(false) // Redis answers the reset (the backoff keeps AllowN on the fallback)
	if err := c.Reset(bg, limiter.Request{Tag: "alice", Values: []string{"phone"}}); err != nil {
		t.Fatal(err)
	}
	if d, err := c.Allow(bg, bob); err != nil || d.Allowed {
		t.Fatalf("bob's third call after a Reset of alice's count = %+v, %v; want refused (bob used his 2): alice's reset cleared his count", d, err)
	}
}
