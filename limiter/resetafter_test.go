package limiter_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

// step is one call in a scripted timeline: advance the clock, ask for n,
// and expect exactly this decision.
type step struct {
	advance   time.Duration
	n         int
	allowed   bool
	remaining int64
	retry     time.Duration
	reset     time.Duration
}

// runSteps plays steps against allowN, moving time with advance.
func runSteps(t *testing.T, steps []step, advance func(time.Duration), allowN func(n int) (limiter.Decision, error)) {
	t.Helper()
	var at time.Duration
	for i, s := range steps {
		advance(s.advance)
		at += s.advance
		d, err := allowN(s.n)
		if err != nil {
			t.Fatalf("step %d (t=%v, n=%d): %v", i, at, s.n, err)
		}
		if d.Allowed != s.allowed || d.Remaining != s.remaining || d.RetryAfter != s.retry || d.ResetAfter != s.reset {
			t.Fatalf("step %d (t=%v, n=%d) = %+v; want Allowed %v, Remaining %d, RetryAfter %v, ResetAfter %v",
				i, at, s.n, d, s.allowed, s.remaining, s.retry, s.reset)
		}
	}
}

// gcraSteps is a bucket of 4 refilling 2 a second (one token every 500ms),
// the same for GCRA on Redis and for Local.
var gcraSteps = []step{
	{0, 1, true, 3, 0, 500 * time.Millisecond},
	{0, 3, true, 0, 0, 2 * time.Second},
	{0, 1, false, 0, 500 * time.Millisecond, 2 * time.Second},
	{300 * time.Millisecond, 1, false, 0, 200 * time.Millisecond, 1700 * time.Millisecond},
	{199 * time.Millisecond, 1, false, 0, time.Millisecond, 1501 * time.Millisecond},
	{time.Millisecond, 1, true, 0, 0, 2 * time.Second}, // t=0.5: exactly RetryAfter later
	{1999 * time.Millisecond, 4, false, 0, time.Millisecond, time.Millisecond},
	{time.Millisecond, 4, true, 0, 0, 2 * time.Second}, // t=2.5: exactly ResetAfter later, a full burst
}

// ResetAfter and RetryAfter are exact for every algorithm, on the server's
// clock (miniredis TIME), refused calls included.
func TestRedisResetAfterExact(t *testing.T) {
	for _, tc := range []struct {
		alg   limiter.Algorithm
		limit limiter.Limit
		steps []step
	}{
		{limiter.GCRA, limiter.Limit{Rate: 2, Period: time.Second, Burst: 4}, gcraSteps},
		{limiter.FixedWindow, limiter.Limit{Rate: 3, Period: time.Second}, []step{
			{0, 2, true, 1, 0, time.Second},
			{300 * time.Millisecond, 1, true, 0, 0, 700 * time.Millisecond},
			{0, 1, false, 0, 700 * time.Millisecond, 700 * time.Millisecond},
			{699 * time.Millisecond, 1, false, 0, time.Millisecond, time.Millisecond},
			{time.Millisecond, 3, true, 0, 0, time.Second}, // t=1.0: the window closed
			{time.Second, 1, true, 2, 0, time.Second},      // a new window opens at this call
		}},
		{limiter.SlidingWindow, limiter.Limit{Rate: 3, Period: time.Second}, []step{
			{0, 1, true, 2, 0, time.Second},
			{500 * time.Millisecond, 1, true, 1, 0, time.Second},
			{400 * time.Millisecond, 1, true, 0, 0, time.Second},
			// t=1.1: the event at 0 is gone; two more need the one at 0.5 gone
			// (0.4s), the log is empty once the one at 0.9 is (0.8s).
			{200 * time.Millisecond, 2, false, 0, 400 * time.Millisecond, 800 * time.Millisecond},
			{399 * time.Millisecond, 2, false, 0, time.Millisecond, 401 * time.Millisecond},
			{time.Millisecond, 2, true, 0, 0, time.Second}, // t=1.5
			{0, 1, false, 0, 400 * time.Millisecond, time.Second},
			{999 * time.Millisecond, 3, false, 0, time.Millisecond, time.Millisecond},
			{time.Millisecond, 3, true, 0, 0, time.Second}, // t=2.5: the log is empty
		}},
	} {
		t.Run(tc.alg.String(), func(t *testing.T) {
			m, rdb := newMini(t)
			l := newRedis(t, rdb, limiter.RedisConfig{Algorithm: tc.alg, Limit: tc.limit})
			runSteps(t, tc.steps, m.advance, func(n int) (limiter.Decision, error) { return l.AllowN(bg, "k", n) })
		})
	}
}

func TestLocalResetAfterExact(t *testing.T) {
	clock := newManualClock()
	l := newLocal(t, limiter.LocalConfig{Limit: limiter.Limit{Rate: 2, Period: time.Second, Burst: 4}, Clock: clock})
	runSteps(t, gcraSteps, clock.Advance, func(n int) (limiter.Decision, error) { return l.AllowN(bg, "k", n) })
}

// A Composite's ResetAfter is the longest of its dimensions', refusing or
// not, while Remaining is the most constrained one's.
func TestCompositeResetAfterIsLongest(t *testing.T) {
	for _, tc := range []struct {
		alg   limiter.Algorithm
		steps []step
	}{
		// user: 2 a second (a token every 500ms); sku: 100 an hour (one every 36s).
		{limiter.GCRA, []step{
			{0, 2, true, 0, 0, 72 * time.Second},
			{300 * time.Millisecond, 1, false, 0, 200 * time.Millisecond, 71700 * time.Millisecond},
		}},
		{limiter.FixedWindow, []step{
			{0, 2, true, 0, 0, time.Hour},
			{300 * time.Millisecond, 1, false, 0, 700 * time.Millisecond, time.Hour - 300*time.Millisecond},
		}},
		{limiter.SlidingWindow, []step{
			{0, 2, true, 0, 0, time.Hour},
			{300 * time.Millisecond, 1, false, 0, 700 * time.Millisecond, time.Hour - 300*time.Millisecond},
		}},
	} {
		t.Run(tc.alg.String(), func(t *testing.T) {
			m, rdb := newMini(t)
			c := newComposite(t, rdb, limiter.CompositeConfig{Algorithm: tc.alg, Dimensions: []limiter.Dimension{
				{Name: "user", Limit: limiter.Limit{Rate: 2, Period: time.Second}},
				{Name: "sku", Limit: limiter.Limit{Rate: 100, Period: time.Hour}},
			}})
			req := limiter.Request{Tag: "sale", Values: []string{"u1", "s1"}}
			runSteps(t, tc.steps, m.advance, func(n int) (limiter.Decision, error) { return c.AllowN(bg, req, n) })
			d, err := c.Allow(bg, req)
			if err != nil || d.DeniedBy != "user" {
				t.Fatalf("third call = %+v, %v; want denied by user", d, err)
			}
		})
	}
}

// On real servers (which cannot be told the time), ResetAfter is the
// algorithm's value less at most the time the test has taken.
func TestRedisResetAfterOnServers(t *testing.T) {
	for _, b := range backends(t) {
		for _, alg := range algorithms {
			t.Run(b.name+"/"+alg.String(), func(t *testing.T) {
				l := newRedis(t, b.client(t), limiter.RedisConfig{Algorithm: alg, Limit: limiter.Limit{Rate: 4, Period: time.Hour}})
				// Per call: {RetryAfter, ResetAfter}. A GCRA token takes 15 minutes.
				quarter := 15 * time.Minute
				want := map[limiter.Algorithm][3][2]time.Duration{
					limiter.GCRA:          {{0, quarter}, {0, time.Hour}, {quarter, time.Hour}},
					limiter.FixedWindow:   {{0, time.Hour}, {0, time.Hour}, {time.Hour, time.Hour}},
					limiter.SlidingWindow: {{0, time.Hour}, {0, time.Hour}, {time.Hour, time.Hour}},
				}[alg]
				start := time.Now()
				for i, n := range []int{1, 3, 1} {
					d, err := l.AllowN(bg, "k", n)
					if err != nil || d.Allowed != (i < 2) {
						t.Fatalf("call %d AllowN(%d) = %+v, %v", i, n, d, err)
					}
					slack := time.Since(start) + 5*time.Millisecond
					for j, got := range []time.Duration{d.RetryAfter, d.ResetAfter} {
						if w := want[i][j]; got > w || got < w-slack {
							t.Fatalf("call %d AllowN(%d) = %+v; want %s in [%v, %v]", i, n, d, [2]string{"RetryAfter", "ResetAfter"}[j], w-slack, w)
						}
					}
				}
			})
		}
	}
}

// The Composite's longest dimension, on real servers too.
func TestCompositeResetAfterOnServers(t *testing.T) {
	for _, b := range backends(t) {
		for _, alg := range algorithms {
			t.Run(b.name+"/"+alg.String(), func(t *testing.T) {
				c := newComposite(t, b.client(t), limiter.CompositeConfig{Algorithm: alg, Dimensions: []limiter.Dimension{
					{Name: "user", Limit: limiter.Limit{Rate: 2, Period: time.Second}},
					{Name: "sku", Limit: limiter.Limit{Rate: 100, Period: time.Hour}},
				}})
				want := time.Hour // the SKU's window
				if alg == limiter.GCRA {
					want = 72 * time.Second // two of the SKU's tokens, 36s each
				}
				start := time.Now()
				for i, n := range []int{2, 1} {
					d, err := c.AllowN(bg, limiter.Request{Tag: "sale", Values: []string{"u1", "s1"}}, n)
					slack := time.Since(start) + 5*time.Millisecond
					if err != nil || d.Allowed != (i == 0) || d.ResetAfter > want || d.ResetAfter < want-slack {
						t.Fatalf("call %d AllowN(%d) = %+v, %v; want ResetAfter in [%v, %v]", i, n, d, err, want-slack, want)
					}
				}
			})
		}
	}
}

// While Redis is down, ResetAfter comes from the Fallback (the longest of
// the dimensions it was asked about), or is RetryAfter under FailClosed.
func TestDegradedResetAfter(t *testing.T) {
	clock := newManualClock()
	local := newLocal(t, limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Period: time.Hour, Burst: 2}, Clock: clock})
	c := newComposite(t, newFlaky(t), limiter.CompositeConfig{
		Dimensions: []limiter.Dimension{{Name: "user", Limit: limiter.PerSecond(100)}, {Name: "ip", Limit: limiter.PerSecond(100)}},
		Policy:     limiter.Policy{Fallback: local, Clock: clock},
	})
	if _, err := local.AllowN(bg, ":1:t:ip:10.0.0.1", 2); err != nil { // the bucket of IP 10.0.0.1 under tag t is empty
		t.Fatal(err)
	}
	clock.Advance(30 * time.Minute)
	d, err := c.Allow(bg, limiter.Request{Tag: "t", Values: []string{"u1", ""}})
	if err != nil || !d.Allowed || !d.Degraded || d.ResetAfter != time.Hour {
		t.Fatalf("user alone on the fallback = %+v, %v; want allowed, degraded, ResetAfter 1h", d, err)
	}
	d, err = c.Allow(bg, limiter.Request{Tag: "t", Values: []string{"u2", "10.0.0.1"}})
	if err != nil || d.Allowed || d.DeniedBy != "ip" || d.RetryAfter != 30*time.Minute || d.ResetAfter != 90*time.Minute {
		t.Fatalf("user and spent IP on the fallback = %+v, %v; want denied by ip, RetryAfter 30m, ResetAfter 1h30m", d, err)
	}

	closed := newRedis(t, newFlaky(t), limiter.RedisConfig{Limit: limiter.PerSecond(1), Policy: limiter.Policy{OnError: limiter.FailClosed, Backoff: 250 * time.Millisecond}})
	if d, err := closed.Allow(bg, "k"); err != nil || d.Allowed || d.RetryAfter != 250*time.Millisecond || d.ResetAfter != 250*time.Millisecond {
		t.Fatalf("FailClosed = %+v, %v; want refused, RetryAfter = ResetAfter = the backoff", d, err)
	}
}
