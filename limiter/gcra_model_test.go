package limiter_test

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

// ceilRat is x rounded up to an integer.
func ceilRat(x *big.Rat) int64 {
	q := new(big.Int).Div(x.Num(), x.Denom())
	if new(big.Rat).SetInt(q).Cmp(x) < 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// Every GCRA decision (Allowed, Remaining, RetryAfter, ResetAfter) is the
// one exact rational arithmetic gives, on random limits across the whole
// valid range and random calls: nothing is lost to rounding, on one call
// or over many.
func TestGCRAMatchesExactArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	maxUS := int64(limiter.MaxPeriod / time.Microsecond)
	for iter := range 100 {
		rate := rng.Int64N(limiter.MaxRate) + 1
		if iter%3 == 0 {
			rate = rng.Int64N(20) + 1
		}
		periodUS := rng.Int64N(maxUS-1000) + 1000
		if iter%2 == 0 {
			periodUS = rng.Int64N(100_000) + 1000
		}
		burst := rng.Int64N(rate) + 1
		if float64(burst)/float64(rate)*float64(periodUS) > float64(maxUS) {
			continue
		}
		lim := limiter.Limit{Rate: rate, Period: time.Duration(periodUS) * time.Microsecond, Burst: burst}
		m, rdb := newMini(t)
		l := newRedis(t, rdb, limiter.RedisConfig{Limit: lim})
		e := big.NewRat(periodUS, rate) // µs per event
		now := m.now.UnixMicro()
		tat := new(big.Rat).SetInt64(now)
		for step := range 40 {
			adv := rng.Int64N(3) * rng.Int64N(ceilRat(new(big.Rat).Mul(e, big.NewRat(burst, 1)))+2)
			m.advance(time.Duration(adv) * time.Microsecond)
			now += adv
			at := new(big.Rat).SetInt64(now)
			n := rng.Int64N(burst) + 1
			d, err := l.AllowN(bg, "k", int(n))
			if err != nil {
				t.Fatal(err)
			}
			from := new(big.Rat).Set(tat)
			if from.Cmp(at) < 0 {
				from.Set(at)
			}
			next := new(big.Rat).Add(from, new(big.Rat).Mul(e, big.NewRat(n, 1)))
			allowAt := new(big.Rat).Sub(next, new(big.Rat).Mul(e, big.NewRat(burst, 1)))
			var want limiter.Decision
			if at.Cmp(allowAt) < 0 {
				want.RetryAfter = time.Duration(ceilRat(new(big.Rat).Sub(allowAt, at))) * time.Microsecond
				want.ResetAfter = max(time.Duration(ceilRat(new(big.Rat).Sub(from, at)))*time.Microsecond, want.RetryAfter)
			} else {
				tat = next
				x := new(big.Rat).Quo(new(big.Rat).Sub(at, allowAt), e)
				want.Allowed = true
				want.Remaining = new(big.Int).Div(x.Num(), x.Denom()).Int64()
				want.ResetAfter = time.Duration(ceilRat(new(big.Rat).Sub(next, at))) * time.Microsecond
			}
			if d != want {
				t.Fatalf("%+v, call %d, AllowN(%d) = %+v; exact arithmetic gives %+v", lim, step, n, d, want)
			}
		}
	}
}
