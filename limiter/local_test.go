package limiter_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

func newLocal(t *testing.T, cfg limiter.LocalConfig) *limiter.Local {
	t.Helper()
	l, err := limiter.NewLocal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLocalConcurrentExactBurst(t *testing.T) {
	const burst, calls = 50, 400
	clock := newManualClock()
	l := newLocal(t, limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Period: time.Hour, Burst: burst}, Clock: clock})
	got := countAllowed(t, calls, func(i int) (bool, error) {
		d, err := l.Allow(bg, "user:"+strconv.Itoa(i%2))
		return d.Allowed, err
	})
	if got != 2*burst {
		t.Fatalf("allowed %d of %d calls over 2 keys, want exactly %d", got, calls, 2*burst)
	}
}

func TestLocalRefillFollowsClock(t *testing.T) {
	clock := newManualClock()
	l := newLocal(t, limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Burst: 3}, Clock: clock})
	d, err := l.AllowN(bg, "k", 2)
	if err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("AllowN(2) on a full bucket = %+v, %v; want allowed, 1 remaining", d, err)
	}
	if d, _ = l.Allow(bg, "k"); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("third event = %+v, want allowed, 0 remaining", d)
	}
	d, _ = l.Allow(bg, "k")
	if d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("fourth event = %+v, want refused with RetryAfter 1s", d)
	}
	clock.Advance(999 * time.Millisecond)
	if d, _ = l.Allow(bg, "k"); d.Allowed {
		t.Fatalf("after 999ms = %+v, want refused", d)
	}
	clock.Advance(time.Millisecond)
	if d, _ = l.Allow(bg, "k"); !d.Allowed {
		t.Fatalf("after 1s = %+v, want allowed", d)
	}
	clock.Advance(time.Hour)
	if d, _ = l.AllowN(bg, "k", 3); !d.Allowed {
		t.Fatalf("after an hour AllowN(3) = %+v, want allowed (bucket refilled to burst)", d)
	}
}

// A flood of new keys evicts idle keys one at a time; the key in use keeps
// its count (clear-all eviction would hand it a fresh bucket).
func TestLocalEvictionKeepsActiveKeys(t *testing.T) {
	clock := newManualClock()
	l := newLocal(t, limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Period: time.Hour, Burst: 5}, MaxKeys: 64, Shards: 4, Clock: clock})
	if d, _ := l.AllowN(bg, "abuser", 5); !d.Allowed {
		t.Fatal("first AllowN(5) refused")
	}
	for i := range 10_000 {
		if _, err := l.Allow(bg, "flood:"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		if d, _ := l.Allow(bg, "abuser"); d.Allowed {
			t.Fatalf("abuser admitted again after %d new keys: its bucket was reset", i+1)
		}
		if n := l.Len(); n > 64 {
			t.Fatalf("tracking %d keys, MaxKeys is 64", n)
		}
	}
	if n := l.Len(); n < 32 {
		t.Fatalf("tracking %d keys after a flood, want most of MaxKeys kept (no clear-all)", n)
	}
}

func TestLocalRefusesBadInput(t *testing.T) {
	l := newLocal(t, limiter.LocalConfig{Limit: limiter.Limit{Rate: 10, Burst: 5}})
	for _, tc := range []struct {
		key string
		n   int
	}{{"", 1}, {"k", 0}, {"k", -1}, {"k", 6}, {string(make([]byte, limiter.MaxKeyLen+1)), 1}} {
		if _, err := l.AllowN(bg, tc.key, tc.n); !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("AllowN(%q, %d) error = %v, want ErrInvalid", tc.key, tc.n, err)
		}
	}
	for _, cfg := range []limiter.LocalConfig{
		{},
		{Limit: limiter.Limit{Rate: -1}},
		{Limit: limiter.Limit{Rate: 1, Period: time.Microsecond}},
		{Limit: limiter.Limit{Rate: 1, Burst: -1}},
		{Limit: limiter.PerSecond(1), MaxKeys: -1},
		{Limit: limiter.PerSecond(1), Shards: -1},
	} {
		if _, err := limiter.NewLocal(cfg); !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("NewLocal(%+v) error = %v, want ErrInvalid", cfg, err)
		}
	}
}
