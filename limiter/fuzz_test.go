package limiter_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/limiter"
)

// validLimit predicts whether a Limit is accepted, from its documentation.
func validLimit(l limiter.Limit, alg limiter.Algorithm) bool {
	if l.Period == 0 {
		l.Period = time.Second
	}
	if l.Burst == 0 {
		l.Burst = l.Rate
	}
	maxRate := int64(limiter.MaxRate)
	if alg == limiter.SlidingWindow {
		maxRate = limiter.MaxSlidingRate
	}
	switch {
	case alg > limiter.SlidingWindow || alg < limiter.GCRA:
		return false
	case l.Rate < 1 || l.Rate > maxRate || l.Burst < 1 || l.Burst > limiter.MaxRate:
		return false
	case l.Period < limiter.MinPeriod || l.Period > limiter.MaxPeriod:
		return false
	case alg == limiter.GCRA && float64(l.Burst)/float64(l.Rate)*float64(l.Period) > float64(limiter.MaxPeriod):
		return false
	}
	return true
}

// Any key, limit and n: no panic; bad input is ErrInvalid; good input on a
// fresh key within the limit's capacity is admitted, and the Redis key is
// the documented one, hash tag intact.
func FuzzKeysAndLimits(f *testing.F) {
	f.Add("user:42", int64(10), int64(0), int64(1000), 1, uint8(0))
	f.Add("ip:2001:db8::1", int64(5), int64(20), int64(60_000), 20, uint8(0))
	f.Add("sku é", int64(3), int64(0), int64(1), 3, uint8(1))
	f.Add("k", int64(10_000), int64(0), int64(1000), 10_000, uint8(2))
	f.Add("k", int64(10_001), int64(0), int64(1000), 1, uint8(2))
	f.Add("k", int64(1), int64(1_000_000_000), int64(31_622_400_000), 5, uint8(0))
	f.Add("a{b}c", int64(1), int64(0), int64(0), 1, uint8(0))
	f.Add("", int64(1), int64(0), int64(0), 1, uint8(1))
	f.Add("tab\t", int64(1), int64(0), int64(0), 1, uint8(1))
	f.Add("\xff\xfe", int64(1), int64(0), int64(0), 1, uint8(2))
	f.Add("k", int64(0), int64(0), int64(0), 1, uint8(0))
	f.Add("k", int64(-5), int64(-1), int64(-1), 0, uint8(3))
	f.Add("k", int64(10), int64(5), int64(1000), 6, uint8(0))
	f.Add("k", int64(1_000_000_000), int64(1_000_000_000), int64(1), 1_000_000_000, uint8(0))
	f.Add("k", int64(9_000_000_000_000), int64(0), int64(1<<62), 1, uint8(1))

	mr := miniredis.RunT(f)
	mr.SetTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	f.Cleanup(func() { _ = rdb.Close() })
	var seq int

	f.Fuzz(func(t *testing.T, key string, rate, burst, periodMs int64, n int, algN uint8) {
		seq++
		alg := limiter.Algorithm(algN % 4)
		lim := limiter.Limit{Rate: rate, Burst: burst, Period: time.Duration(periodMs) * time.Millisecond}
		p := "fz" + strconv.Itoa(seq)
		r, err := limiter.NewRedis(rdb, limiter.RedisConfig{Prefix: p, Algorithm: alg, Limit: lim})
		if ok := validLimit(lim, alg); ok != (err == nil) {
			t.Fatalf("NewRedis(%+v, %v) error = %v, predicted valid %v", lim, alg, err, ok)
		}
		if err != nil {
			if !errors.Is(err, limiter.ErrInvalid) {
				t.Fatalf("NewRedis error = %v, want ErrInvalid", err)
			}
			return
		}
		capacity := max(lim.Burst, 0)
		if capacity == 0 || alg != limiter.GCRA {
			capacity = lim.Rate
		}
		good := limiter.ValidateKey("key", key) == nil && n >= 1 && int64(n) <= capacity
		d, err := r.AllowN(bg, key, n)
		if !good {
			if !errors.Is(err, limiter.ErrInvalid) {
				t.Fatalf("AllowN(%q, %d) = %+v, %v; want ErrInvalid", key, n, d, err)
			}
			return
		}
		if err != nil || !d.Allowed {
			t.Fatalf("AllowN(%q, %d) on a fresh key under %+v/%v = %+v, %v; want allowed", key, n, lim, alg, d, err)
		}
		want := p + ":" + alg.String() + ":{" + key + "}"
		if !mr.Exists(want) {
			t.Fatalf("key %q not written (have %q)", want, mr.Keys())
		}
		if alg == limiter.GCRA {
			if d, err := r.AllowN(bg, key, n); err != nil || (d.Allowed && int64(n)*2 > capacity) {
				t.Fatalf("second AllowN(%d) with capacity %d = %+v, %v", n, capacity, d, err)
			}
		}
		l, err := limiter.NewLocal(limiter.LocalConfig{Limit: lim, MaxKeys: 4})
		if err != nil || alg != limiter.GCRA {
			return
		}
		if d, err := l.AllowN(bg, key, n); err != nil || !d.Allowed {
			t.Fatalf("Local.AllowN(%q, %d) under %+v = %+v, %v; want allowed", key, n, lim, d, err)
		}
	})
}
