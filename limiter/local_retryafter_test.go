package limiter_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

// Local's RetryAfter is the least wait, even on a long period: the refused
// call passes at now+RetryAfter and not a nanosecond earlier.
func TestLocalRetryAfterIsLeastWaitOnLongPeriod(t *testing.T) {
	lim := limiter.Limit{Rate: 7, Period: 300 * 24 * time.Hour, Burst: 5} // refill of a burst: ~214 days <= MaxPeriod
	clock := newManualClock()
	l, err := limiter.NewLocal(limiter.LocalConfig{Limit: lim, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.AllowN(bg, "k", 5); err != nil || !d.Allowed {
		t.Fatalf("AllowN(5) on a full bucket = %+v, %v", d, err)
	}
	d, err := l.AllowN(bg, "k", 2)
	if err != nil || d.Allowed {
		t.Fatalf("AllowN(2) on an empty bucket = %+v, %v; want refused", d, err)
	}
	clock.Advance(d.RetryAfter - 1)
	if early, _ := l.AllowN(bg, "k", 2); early.Allowed {
		t.Fatalf("AllowN(2) 1ns before RetryAfter %v was allowed; RetryAfter is documented as the least wait", d.RetryAfter)
	}
	clock.Advance(1)
	if on, err := l.AllowN(bg, "k", 2); err != nil || !on.Allowed {
		t.Fatalf("AllowN(2) at RetryAfter %v = %+v, %v; want allowed", d.RetryAfter, on, err)
	}
}

// On random limits across the valid range (up to one event per ns, Period
// up to MaxPeriod) and random partial refills, a refused call passes at
// now+RetryAfter and not a nanosecond earlier.
func TestLocalRetryAfterIsLeastWait(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		period := time.Duration(rng.Int64N(int64(limiter.MaxPeriod-limiter.MinPeriod))) + limiter.MinPeriod
		if rng.IntN(2) == 0 {
			period = time.Duration(rng.Int64N(int64(time.Minute))) + limiter.MinPeriod
		}
		period = period.Truncate(time.Microsecond) // a Period is whole microseconds
		rate := rng.Int64N(min(limiter.MaxRate, period.Nanoseconds())) + 1
		burst := rng.Int64N(min(rate, 1000)) + 1
		lim := limiter.Limit{Rate: rate, Period: period, Burst: burst}
		if float64(burst)/float64(rate)*float64(period) > float64(limiter.MaxPeriod) {
			continue
		}
		clock := newManualClock()
		l, err := limiter.NewLocal(limiter.LocalConfig{Limit: lim, Clock: clock})
		if err != nil {
			t.Fatalf("NewLocal(%+v) = %v", lim, err)
		}
		if d, err := l.AllowN(bg, "k", int(burst)); err != nil || !d.Allowed {
			t.Fatalf("%+v: AllowN(Burst) on a full bucket = %+v, %v", lim, d, err)
		}
		refill := time.Duration(float64(period) / float64(rate) * float64(burst))
		clock.Advance(time.Duration(rng.Int64N(int64(refill)/2 + 1)))
		n := int(rng.Int64N(burst) + 1)
		d, err := l.AllowN(bg, "k", n)
		if err != nil || d.Allowed {
			continue
		}
		clock.Advance(d.RetryAfter - 1)
		if early, _ := l.AllowN(bg, "k", n); early.Allowed {
			t.Fatalf("%+v: AllowN(%d) 1ns before RetryAfter %v was allowed", lim, n, d.RetryAfter)
		}
		clock.Advance(1)
		if on, err := l.AllowN(bg, "k", n); err != nil || !on.Allowed {
			t.Fatalf("%+v: AllowN(%d) at RetryAfter %v = %+v, %v; want allowed", lim, n, d.RetryAfter, on, err)
		}
	}
}
