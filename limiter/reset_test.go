package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

// A reset key admits a whole capacity again, as a fresh key; other keys
// keep their counts. On every backend and algorithm.
func TestRedisReset(t *testing.T) {
	for _, b := range backends(t) {
		for _, alg := range algorithms {
			t.Run(b.name+"/"+alg.String(), func(t *testing.T) {
				p, rdb := prefix(t), b.client(t)
				l := newRedis(t, rdb, limiter.RedisConfig{Prefix: p, Algorithm: alg, Limit: limiter.Limit{Rate: 3, Period: time.Hour}})
				for _, k := range []string{"a", "b"} {
					if d, err := l.AllowN(bg, k, 3); err != nil || !d.Allowed {
						t.Fatalf("AllowN(%s, 3) = %+v, %v", k, d, err)
					}
				}
				if d, _ := l.Allow(bg, "a"); d.Allowed {
					t.Fatalf("a spent: Allow = %+v, want refused", d)
				}
				if err := l.Reset(bg, "a"); err != nil {
					t.Fatal(err)
				}
				if n, err := rdb.Exists(bg, p+":"+alg.String()+":{a}").Result(); err != nil || n != 0 {
					t.Fatalf("a's Redis key after Reset: exists %d, %v; want gone", n, err)
				}
				d, err := l.AllowN(bg, "a", 3)
				if err != nil || !d.Allowed || d.Remaining != 0 {
					t.Fatalf("AllowN(a, 3) after Reset = %+v, %v; want allowed, 0 remaining (a fresh key)", d, err)
				}
				if d, _ := l.Allow(bg, "b"); d.Allowed {
					t.Fatalf("b after resetting a = %+v, want still refused", d)
				}
				if err := l.Reset(bg, "never-used"); err != nil {
					t.Fatalf("Reset of an unknown key = %v, want nil", err)
				}
			})
		}
	}
}

// A Composite resets the dimensions a Request names, and only those.
func TestCompositeReset(t *testing.T) {
	for _, b := range backends(t) {
		for _, alg := range algorithms {
			t.Run(b.name+"/"+alg.String(), func(t *testing.T) {
				c := newComposite(t, b.client(t), userSKU(alg)) // user 3/h, sku 1/h
				call := func(user, sku string, n int) limiter.Decision {
					t.Helper()
					d, err := c.AllowN(bg, limiter.Request{Tag: "sale", Values: []string{user, sku}}, n)
					if err != nil {
						t.Fatal(err)
					}
					return d
				}
				reset := func(user, sku string) {
					t.Helper()
					if err := c.Reset(bg, limiter.Request{Tag: "sale", Values: []string{user, sku}}); err != nil {
						t.Fatal(err)
					}
				}
				if d := call("u1", "s1", 1); !d.Allowed {
					t.Fatalf("first call = %+v", d)
				}
				if d := call("u1", "s1", 1); d.Allowed || d.DeniedBy != "sku" {
					t.Fatalf("second call = %+v, want denied by sku", d)
				}
				reset("", "s1")
				if d := call("u1", "", 1); !d.Allowed || d.Remaining != 1 {
					t.Fatalf("u1 after resetting s1 = %+v, want allowed with 1 remaining (u1 kept its count)", d)
				}
				if d := call("u1", "s1", 1); !d.Allowed {
					t.Fatalf("s1 after its Reset = %+v, want allowed", d)
				}
				if d := call("u2", "s1", 1); d.Allowed || d.DeniedBy != "sku" {
					t.Fatalf("s1 spent again = %+v, want denied by sku", d)
				}
				reset("u1", "s1")
				if d := call("u1", "", 3); !d.Allowed || d.Remaining != 0 {
					t.Fatalf("AllowN(u1, 3) after Reset = %+v, want allowed (fresh), 0 remaining", d)
				}
				if d := call("u2", "s1", 1); !d.Allowed {
					t.Fatalf("s1 after Reset = %+v, want allowed", d)
				}
			})
		}
	}
}

// Untagged keys in different slots are reset one by one: no ErrCrossSlot,
// on the Cluster too.
func TestCompositeResetAcrossSlots(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			c := newComposite(t, b.client(t), userSKU(limiter.GCRA))
			alice, sku := limiter.Request{Values: []string{"alice", ""}}, limiter.Request{Values: []string{"", "sku-1"}}
			for _, req := range []limiter.Request{alice, sku} {
				if d, err := c.Allow(bg, req); err != nil || !d.Allowed {
					t.Fatalf("Allow(%v) = %+v, %v", req.Values, d, err)
				}
			}
			if d, _ := c.Allow(bg, sku); d.Allowed {
				t.Fatalf("sku-1 spent: %+v, want refused", d)
			}
			if err := c.Reset(bg, limiter.Request{Values: []string{"alice", "sku-1"}}); err != nil {
				t.Fatalf("untagged Reset over two slots = %v, want nil", err)
			}
			if d, err := c.AllowN(bg, alice, 3); err != nil || !d.Allowed {
				t.Fatalf("AllowN(alice, 3) after Reset = %+v, %v; want allowed", d, err)
			}
			if d, err := c.Allow(bg, sku); err != nil || !d.Allowed {
				t.Fatalf("sku-1 after Reset = %+v, %v; want allowed", d, err)
			}
		})
	}
}

func TestLocalReset(t *testing.T) {
	clock := newManualClock()
	l := newLocal(t, limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Period: time.Hour, Burst: 3}, Clock: clock})
	for _, k := range []string{"a", "b"} {
		if d, _ := l.AllowN(bg, k, 3); !d.Allowed {
			t.Fatalf("AllowN(%s, 3) refused", k)
		}
	}
	if err := l.Reset(bg, "a"); err != nil {
		t.Fatal(err)
	}
	if n := l.Len(); n != 1 {
		t.Fatalf("tracking %d keys after Reset, want 1", n)
	}
	if d, _ := l.AllowN(bg, "a", 3); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("AllowN(a, 3) after Reset = %+v, want allowed (a full bucket)", d)
	}
	if d, _ := l.Allow(bg, "b"); d.Allowed {
		t.Fatalf("b after resetting a = %+v, want refused", d)
	}
	if err := l.Reset(bg, "never-used"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", string(make([]byte, limiter.MaxKeyLen+1))} {
		if err := l.Reset(bg, key); !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("Reset(%q) = %v, want ErrInvalid", key, err)
		}
	}
	var _ limiter.Resetter = l
}

// Bad input is refused before any Redis call.
func TestResetRefusesBadInput(t *testing.T) {
	f := newFlaky(t)
	f.down.Store(false)
	l := newRedis(t, f, limiter.RedisConfig{Limit: limiter.PerSecond(1)})
	for _, key := range []string{"", "a{b}", "tab\there", "\xff", string(make([]byte, 300))} {
		if err := l.Reset(bg, key); !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("Reset(%q) = %v, want ErrInvalid", key, err)
		}
	}
	c := newComposite(t, f, userSKU(limiter.GCRA))
	for _, req := range []limiter.Request{
		{Values: []string{"u"}},
		{Values: []string{"", ""}},
		{Values: []string{"u{1}", "s"}, Tag: "t"},
		{Values: []string{"u", "s"}, Tag: "t}"},
	} {
		if err := c.Reset(bg, req); !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("Composite.Reset(%+v) = %v, want ErrInvalid", req, err)
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("Redis called %d times for invalid input, want 0", n)
	}
}

// A Redis failure is a *RedisError, reported and never masked; Reset tries
// Redis even within the backoff; an ended context clears nothing.
func TestResetErrors(t *testing.T) {
	f := newFlaky(t)
	clock := newManualClock()
	var reported int
	l := newRedis(t, f, limiter.RedisConfig{Limit: limiter.PerSecond(1), Policy: limiter.Policy{
		OnError: limiter.FailOpen, Clock: clock, OnRedisError: func(error) { reported++ },
	}})
	err := l.Reset(bg, "k")
	var rerr *limiter.RedisError
	if !errors.As(err, &rerr) || !errors.Is(err, errDown) || !errors.Is(err, limiter.ErrUnavailable) || reported != 1 {
		t.Fatalf("Reset with Redis down = %v (reported %d); want a reported *RedisError under FailOpen too", err, reported)
	}
	f.down.Store(false)
	calls := f.calls.Load()
	if err := l.Reset(bg, "k"); err != nil || f.calls.Load() != calls+1 {
		t.Fatalf("Reset within the backoff with Redis back = %v after %d calls; want nil after 1", err, f.calls.Load()-calls)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := l.Reset(ctx, "k"); !errors.Is(err, context.Canceled) || f.calls.Load() != calls+1 {
		t.Fatalf("Reset on a canceled context = %v; want context.Canceled and no Redis call", err)
	}
}

// The Fallback's count is reset too, so a reset key is fresh while Redis is
// down; an ended context leaves it alone.
func TestResetClearsFallback(t *testing.T) {
	f := newFlaky(t)
	clock := newManualClock()
	local := newLocal(t, limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Period: time.Hour, Burst: 1}, Clock: clock})
	c := newComposite(t, f, limiter.CompositeConfig{
		Dimensions: []limiter.Dimension{{Name: "user", Limit: limiter.PerSecond(100)}, {Name: "ip", Limit: limiter.PerSecond(100)}},
		Policy:     limiter.Policy{Fallback: local, Clock: clock, Backoff: -1},
	})
	req := limiter.Request{Tag: "t", Values: []string{"u1", "10.0.0.1"}}
	if d, err := c.Allow(bg, req); err != nil || !d.Allowed || !d.Degraded {
		t.Fatalf("first call on the fallback = %+v, %v", d, err)
	}
	if d, _ := c.Allow(bg, req); d.Allowed {
		t.Fatalf("second call on the fallback = %+v, want refused", d)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := c.Reset(ctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reset on a canceled context = %v, want context.Canceled", err)
	}
	if d, _ := local.Allow(bg, ":1:t:user:u1"); d.Allowed { // the Fallback key of user u1 under tag t
		t.Fatalf("fallback after a canceled Reset = %+v, want still refused", d)
	}
	if err := c.Reset(bg, req); !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("Reset with Redis down = %v, want ErrUnavailable", err)
	}
	if d, err := c.Allow(bg, req); err != nil || !d.Allowed || !d.Degraded {
		t.Fatalf("call on the fallback after Reset = %+v, %v; want allowed (both dimensions fresh)", d, err)
	}

	r := newRedis(t, f, limiter.RedisConfig{Limit: limiter.PerSecond(100), Policy: limiter.Policy{Fallback: local, Backoff: -1}})
	if d, _ := r.Allow(bg, "k"); !d.Allowed || !d.Degraded {
		t.Fatalf("Redis limiter on the fallback = %+v", d)
	}
	f.down.Store(false)
	if err := r.Reset(bg, "k"); err != nil {
		t.Fatal(err)
	}
	if d, _ := local.Allow(bg, "k"); !d.Allowed {
		t.Fatalf("fallback key after Redis.Reset = %+v, want allowed", d)
	}
}
