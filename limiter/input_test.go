package limiter_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/limiter"
)

// doc.go: "Nothing in this package panics on input." NewRedis and
// NewComposite refuse a nil client ("nil redis.Scripter"), but a nil
// *redis.Client (a typed nil in the interface) is accepted, and the first
// call then panics; so does a nil *Local given as the Policy's Fallback.
func TestTypedNilInputsAreInvalid(t *testing.T) {
	call := func(t *testing.T, name string, f func() error) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s panicked: %v; want an error wrapping ErrInvalid", name, r)
			}
		}()
		if err := f(); !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("%s = %v; want an error wrapping ErrInvalid", name, err)
		}
	}
	var nilClient *redis.Client
	call(t, "NewRedis(nil *redis.Client) then Allow", func() error {
		l, err := limiter.NewRedis(nilClient, limiter.RedisConfig{Limit: limiter.PerSecond(1)})
		if err != nil {
			return err
		}
		_, err = l.Allow(bg, "k")
		return err
	})
	call(t, "NewComposite(nil *redis.Client) then Allow", func() error {
		c, err := limiter.NewComposite(nilClient, limiter.CompositeConfig{Dimensions: []limiter.Dimension{{Name: "user", Limit: limiter.PerSecond(1)}}})
		if err != nil {
			return err
		}
		_, err = c.Allow(bg, limiter.Request{Values: []string{"u"}})
		return err
	})
	var nilClock *manualClock
	call(t, "Policy.Clock = nil *manualClock, Redis down", func() error {
		f := newFlaky(t)
		l, err := limiter.NewRedis(f, limiter.RedisConfig{Limit: limiter.PerSecond(1), Policy: limiter.Policy{Clock: nilClock, OnError: limiter.FailOpen}})
		if err != nil {
			return err
		}
		_, err = l.Allow(bg, "k")
		return err
	})
	call(t, "LocalConfig.Clock = nil *manualClock", func() error {
		l, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.PerSecond(1), Clock: nilClock})
		if err != nil {
			return err
		}
		_, err = l.Allow(bg, "k")
		return err
	})
	var nilLocal *limiter.Local
	call(t, "Policy.Fallback = nil *Local, Redis down", func() error {
		f := newFlaky(t)
		l, err := limiter.NewRedis(f, limiter.RedisConfig{Limit: limiter.PerSecond(1), Policy: limiter.Policy{Fallback: nilLocal}})
		if err != nil {
			return err
		}
		_, err = l.Allow(bg, "k")
		return err
	})
}

// Limit: "For FixedWindow and SlidingWindow, Rate is the most events in one
// window of Period, and Burst is ignored." A window limit whose Burst is
// outside [1, MaxRate] is refused, as if Burst counted.
func TestWindowLimitIgnoresBurst(t *testing.T) {
	_, rdb := newMini(t)
	for _, alg := range []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingWindow} {
		for _, burst := range []int64{-1, limiter.MaxRate + 1} {
			_, err := limiter.NewRedis(rdb, limiter.RedisConfig{Algorithm: alg, Prefix: prefix(t),
				Limit: limiter.Limit{Rate: 10, Period: time.Minute, Burst: burst}})
			if err != nil {
				t.Errorf("%v with Burst %d (ignored) = %v; want accepted", alg, burst, err)
			}
		}
	}
}
