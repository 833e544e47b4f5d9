package limiter_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

// A Period that is not a whole number of microseconds, which Redis cannot
// count, is refused by every limiter with ErrInvalid, rather than cut to
// whole microseconds (which admitted an event early).
func TestPeriodOfAFractionOfAMicrosecondIsRefused(t *testing.T) {
	_, rdb := newMini(t)
	lim := limiter.Limit{Rate: 1, Period: 1999999 * time.Nanosecond, Burst: 1}
	if _, err := limiter.NewRedis(rdb, limiter.RedisConfig{Prefix: prefix(t), Limit: lim}); !errors.Is(err, limiter.ErrInvalid) {
		t.Errorf("NewRedis with Period %v: %v, want ErrInvalid", lim.Period, err)
	}
	if _, err := limiter.NewComposite(rdb, limiter.CompositeConfig{Prefix: prefix(t), Dimensions: []limiter.Dimension{{Name: "user", Limit: lim}}}); !errors.Is(err, limiter.ErrInvalid) {
		t.Errorf("NewComposite with Period %v: %v, want ErrInvalid", lim.Period, err)
	}
	if _, err := limiter.NewLocal(limiter.LocalConfig{Limit: lim}); !errors.Is(err, limiter.ErrInvalid) {
		t.Errorf("NewLocal with Period %v: %v, want ErrInvalid", lim.Period, err)
	}
	lim.Period = 1999 * time.Microsecond
	if _, err := limiter.NewRedis(rdb, limiter.RedisConfig{Prefix: prefix(t), Limit: lim}); err != nil {
		t.Errorf("NewRedis with Period %v: %v", lim.Period, err)
	}
}
