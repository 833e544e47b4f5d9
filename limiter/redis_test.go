package limiter_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/limiter"
)

var algorithms = []limiter.Algorithm{limiter.GCRA, limiter.FixedWindow, limiter.SlidingWindow}

func newRedis(t testing.TB, rdb redis.Scripter, cfg limiter.RedisConfig) *limiter.Redis {
	t.Helper()
	if cfg.Prefix == "" {
		cfg.Prefix = prefix(t)
	}
	l, err := limiter.NewRedis(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// N goroutines against a limit of B: exactly B allowed, per key, on every
// backend and algorithm.
func TestRedisConcurrentExact(t *testing.T) {
	for _, b := range backends(t) {
		for _, alg := range algorithms {
			t.Run(b.name+"/"+alg.String(), func(t *testing.T) {
				const limit, calls = 20, 150
				l := newRedis(t, b.client(t), limiter.RedisConfig{Algorithm: alg, Limit: limiter.Limit{Rate: limit, Period: time.Hour}})
				got := countAllowed(t, calls, func(i int) (bool, error) {
					d, err := l.Allow(bg, "user:"+strconv.Itoa(i%3))
					return d.Allowed, err
				})
				if got != 3*limit {
					t.Fatalf("allowed %d of %d calls over 3 keys, want exactly %d", got, calls, 3*limit)
				}
			})
		}
	}
}

func TestRedisAllowNCountsAndRemaining(t *testing.T) {
	for _, b := range backends(t) {
		for _, alg := range algorithms {
			t.Run(b.name+"/"+alg.String(), func(t *testing.T) {
				l := newRedis(t, b.client(t), limiter.RedisConfig{Algorithm: alg, Limit: limiter.Limit{Rate: 5, Period: time.Hour}})
				d, err := l.AllowN(bg, "k", 3)
				if err != nil || !d.Allowed || d.Remaining != 2 {
					t.Fatalf("AllowN(3) of 5 = %+v, %v; want allowed, 2 remaining", d, err)
				}
				d, err = l.AllowN(bg, "k", 3)
				if err != nil || d.Allowed || d.RetryAfter <= 0 || d.Remaining != 0 {
					t.Fatalf("AllowN(3) with 2 left = %+v, %v; want refused with a RetryAfter", d, err)
				}
				if d, _ = l.AllowN(bg, "k", 2); !d.Allowed || d.Remaining != 0 {
					t.Fatalf("AllowN(2) with 2 left = %+v; want allowed (the refusal took nothing)", d)
				}
				if d, _ = l.Allow(bg, "k"); d.Allowed {
					t.Fatalf("sixth event = %+v, want refused", d)
				}
				if _, err := l.AllowN(bg, "k", 6); !errors.Is(err, limiter.ErrInvalid) {
					t.Fatalf("AllowN(6) over a limit of 5: error = %v, want ErrInvalid", err)
				}
			})
		}
	}
}

// The scripts read Redis TIME; miniredis returns the time SetTime gave it,
// inside scripts too, so these tests move time without sleeping.
func TestMiniredisTimeFollowsSetTime(t *testing.T) {
	m, rdb := newMini(t)
	m.advance(90 * time.Minute)
	got, err := rdb.Eval(bg, "return redis.call('TIME')", nil).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.FormatInt(m.now.Unix(), 10); got[0] != want {
		t.Fatalf("TIME in a script = %v, want %s", got, want)
	}
}

func TestGCRARefillsOnServerTime(t *testing.T) {
	m, rdb := newMini(t)
	l := newRedis(t, rdb, limiter.RedisConfig{Limit: limiter.Limit{Rate: 2, Period: time.Second, Burst: 4}})
	if d, _ := l.AllowN(bg, "k", 4); !d.Allowed {
		t.Fatal("burst of 4 refused")
	}
	d, _ := l.Allow(bg, "k")
	if d.Allowed || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("fifth event = %+v, want refused with RetryAfter 500ms", d)
	}
	m.advance(499 * time.Millisecond)
	if d, _ = l.Allow(bg, "k"); d.Allowed {
		t.Fatalf("after 499ms = %+v, want refused", d)
	}
	m.advance(time.Millisecond)
	if d, _ = l.Allow(bg, "k"); !d.Allowed {
		t.Fatalf("after 500ms = %+v, want allowed", d)
	}
	m.advance(time.Hour) // the key expired: a full bucket again
	if d, _ = l.AllowN(bg, "k", 4); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after an hour AllowN(4) = %+v, want allowed with 0 remaining", d)
	}
}

func TestFixedWindowResetsAtWindowEnd(t *testing.T) {
	m, rdb := newMini(t)
	l := newRedis(t, rdb, limiter.RedisConfig{Algorithm: limiter.FixedWindow, Limit: limiter.Limit{Rate: 3, Period: time.Second}})
	if d, _ := l.AllowN(bg, "k", 3); !d.Allowed {
		t.Fatal("3 of 3 refused")
	}
	m.advance(300 * time.Millisecond)
	d, _ := l.Allow(bg, "k")
	if d.Allowed || d.RetryAfter != 700*time.Millisecond {
		t.Fatalf("fourth event = %+v, want refused until the window ends in 700ms", d)
	}
	m.advance(700 * time.Millisecond)
	if d, _ = l.AllowN(bg, "k", 3); !d.Allowed {
		t.Fatalf("new window AllowN(3) = %+v, want allowed", d)
	}
}

// The sliding log admits at most Rate in any window: no burst at the edge.
func TestSlidingWindowHasNoEdgeBurst(t *testing.T) {
	m, rdb := newMini(t)
	l := newRedis(t, rdb, limiter.RedisConfig{Algorithm: limiter.SlidingWindow, Limit: limiter.Limit{Rate: 3, Period: time.Second}})
	if d, _ := l.Allow(bg, "k"); !d.Allowed {
		t.Fatal("first refused")
	}
	m.advance(900 * time.Millisecond)
	if d, _ := l.AllowN(bg, "k", 2); !d.Allowed {
		t.Fatal("2 more within the window refused")
	}
	m.advance(200 * time.Millisecond) // a fixed window would have reset here
	d, _ := l.AllowN(bg, "k", 2)
	if d.Allowed || d.RetryAfter != 800*time.Millisecond {
		t.Fatalf("AllowN(2) 1.1s in = %+v, want refused for 800ms (until an event at 0.9s leaves)", d)
	}
	if d, _ = l.Allow(bg, "k"); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("Allow 1.1s in = %+v, want allowed (the event at 0s left), 0 remaining", d)
	}
	m.advance(900 * time.Millisecond)
	if d, _ = l.AllowN(bg, "k", 2); !d.Allowed {
		t.Fatalf("AllowN(2) 2.0s in = %+v, want allowed", d)
	}
}

// Every key a limiter writes expires, so idle keys do not pile up in Redis.
func TestRedisKeysExpire(t *testing.T) {
	for _, b := range backends(t) {
		for _, alg := range algorithms {
			t.Run(b.name+"/"+alg.String(), func(t *testing.T) {
				p, rdb := prefix(t), b.client(t)
				l := newRedis(t, rdb, limiter.RedisConfig{Prefix: p, Algorithm: alg, Limit: limiter.PerMinute(10)})
				if d, err := l.Allow(bg, "user:7"); err != nil || !d.Allowed {
					t.Fatalf("Allow = %+v, %v", d, err)
				}
				key := p + ":" + alg.String() + ":{user:7}"
				ttl, err := rdb.PTTL(bg, key).Result()
				if err != nil || ttl <= 0 || ttl > time.Minute+2*time.Millisecond {
					t.Fatalf("PTTL %s = %v, %v; want (0, 1m]", key, ttl, err)
				}
			})
		}
	}
}

func TestRedisRefusesBadInput(t *testing.T) {
	_, rdb := newMini(t)
	l := newRedis(t, rdb, limiter.RedisConfig{Limit: limiter.PerSecond(10)})
	for _, key := range []string{"", "a{b}", "tab\there", "\xff", string(make([]byte, 300))} {
		if _, err := l.Allow(bg, key); !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("Allow(%q) error = %v, want ErrInvalid", key, err)
		}
	}
	for _, cfg := range []limiter.RedisConfig{
		{},
		{Limit: limiter.PerSecond(1), Prefix: "a{b"},
		{Limit: limiter.PerSecond(1), Algorithm: 7},
		{Limit: limiter.Limit{Rate: limiter.MaxSlidingRate + 1}, Algorithm: limiter.SlidingWindow},
		{Limit: limiter.PerSecond(1), Policy: limiter.Policy{OnError: 9}},
	} {
		if _, err := limiter.NewRedis(rdb, cfg); !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("NewRedis(%+v) error = %v, want ErrInvalid", cfg, err)
		}
	}
	if _, err := limiter.NewRedis(nil, limiter.RedisConfig{Limit: limiter.PerSecond(1)}); !errors.Is(err, limiter.ErrInvalid) {
		t.Errorf("NewRedis(nil) error = %v, want ErrInvalid", err)
	}
}
