package limiter_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

// GCRA's Decision.Remaining is how many more single events pass right now:
// after the first event on a fresh key, Burst-1, and exactly that many more
// calls pass (here 10 µs apart, as on a live server), for rates whose
// emission interval is not a whole number of microseconds.
func TestGCRARemainingIsExact(t *testing.T) {
	for _, lim := range []limiter.Limit{limiter.PerSecond(6), limiter.PerSecond(7), limiter.PerMinute(9), limiter.PerMinute(11)} {
		m, rdb := newMini(t)
		l := newRedis(t, rdb, limiter.RedisConfig{Limit: lim})
		d, err := l.Allow(bg, "k")
		if err != nil {
			t.Fatal(err)
		}
		more := int64(0)
		for range lim.Rate + 2 {
			m.advance(10 * time.Microsecond)
			next, err := l.Allow(bg, "k")
			if err != nil {
				t.Fatal(err)
			}
			if !next.Allowed {
				break
			}
			more++
		}
		if !d.Allowed || d.Remaining != lim.Rate-1 || more != d.Remaining {
			t.Errorf("Rate %d per %v (Burst %d): first call on a fresh key = %+v, then %d more allowed 10µs apart; want Remaining %d and that many more allowed",
				lim.Rate, lim.Period, lim.Rate, d, more, lim.Rate-1)
		}
	}
}

// GCRA admits a whole Burst at one instant, whatever the emission interval:
// no event is charged more than its share of the period, so calls within
// the same microsecond (here miniredis with its TIME held still) still get
// Burst events.
func TestGCRABurstAtOneInstant(t *testing.T) {
	t.Run("Redis rate 3/s", func(t *testing.T) {
		_, rdb := newMini(t)
		l := newRedis(t, rdb, limiter.RedisConfig{Limit: limiter.PerSecond(3)})
		allowed := 0
		for range 3 {
			d, err := l.Allow(bg, "k")
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				allowed++
			}
		}
		if allowed != 3 {
			t.Fatalf("3 calls at one instant on Rate 3/s, Burst 3: %d allowed, want 3", allowed)
		}
	})
	t.Run("Composite rate 7/min", func(t *testing.T) {
		_, rdb := newMini(t)
		c := newComposite(t, rdb, limiter.CompositeConfig{Dimensions: []limiter.Dimension{{Name: "user", Limit: limiter.PerMinute(7)}}})
		allowed := 0
		for range 7 {
			d, err := c.Allow(bg, limiter.Request{Values: []string{"u1"}})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				allowed++
			}
		}
		if allowed != 7 {
			t.Fatalf("7 calls at one instant on Rate 7/min, Burst 7: %d allowed, want 7", allowed)
		}
	})
	t.Run("Redis rate 4000/ms", func(t *testing.T) {
		// 0.25 µs per event.
		_, rdb := newMini(t)
		l := newRedis(t, rdb, limiter.RedisConfig{Limit: limiter.Limit{Rate: 4000, Period: time.Millisecond}})
		if d, err := l.AllowN(bg, "k", 1); err != nil || !d.Allowed || d.Remaining != 3999 {
			t.Fatalf("AllowN(1) = %+v, %v; want allowed with 3999 remaining", d, err)
		}
		if d, err := l.AllowN(bg, "k", 3999); err != nil || !d.Allowed {
			t.Fatalf("AllowN(3999) after AllowN(1) on Burst 4000 at one instant = %+v, %v; want allowed", d, err)
		}
	})
}
