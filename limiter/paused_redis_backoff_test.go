package limiter_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/limiter"
)

// startOwnRedis starts a redis-server on port (one of this file's private
// ports) that the test may pause or kill.
func startOwnRedis(t *testing.T, port string) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server")
	}
	srv := exec.Command("redis-server", "--port", port, "--save", "", "--appendonly", "no", "--bind", "127.0.0.1")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Signal(syscall.SIGCONT); _ = srv.Process.Kill(); _ = srv.Wait() })
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return srv
		}
		if i > 200 {
			t.Fatal("redis-server did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// allowOn returns one call of a limiter of 100 a minute on rdb with policy
// p: a Redis limiter's of key "k" for kind "Redis", a Composite's of two
// dimensions (user u1, SKU sku1) for "Composite".
func allowOn(t *testing.T, kind string, rdb *redis.Client, p limiter.Policy) func(context.Context) (limiter.Decision, error) {
	t.Helper()
	if kind == "Redis" {
		l, err := limiter.NewRedis(rdb, limiter.RedisConfig{Limit: limiter.Limit{Rate: 100, Period: time.Minute}, Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		return func(ctx context.Context) (limiter.Decision, error) { return l.Allow(ctx, "k") }
	}
	c, err := limiter.NewComposite(rdb, limiter.CompositeConfig{
		Dimensions: []limiter.Dimension{
			{Name: "user", Limit: limiter.Limit{Rate: 100, Period: time.Minute}},
			{Name: "sku", Limit: limiter.Limit{Rate: 100, Period: time.Minute}},
		},
		Policy: p,
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) (limiter.Decision, error) {
		return c.Allow(ctx, limiter.Request{Tag: "u1", Values: []string{"u1", "sku1"}})
	}
}

// A Redis that stops answering (paused) is a Redis failure, whatever the
// caller's deadline: Policy.Backoff is "how long, after a Redis failure,
// calls skip Redis and go straight to the Fallback or OnError mode, so a
// down Redis does not cost every request a timeout", and OnRedisError "is
// told of every Redis failure". A request whose own deadline is shorter
// than the client's read timeout (an HTTP handler's budget) meets the
// read timeout after its deadline: its context has ended, so it gets no
// decision and an error matching context.DeadlineExceeded and
// ErrUnavailable, and counts toward Policy.DeadlineFailures (default 3):
// the third such request in a row starts the Backoff and is told to
// OnRedisError, and the next request is decided by FailOpen at once.
// Redis and Composite share the path.
func TestPausedRedisStartsTheBackoffWhateverTheCallersDeadline(t *testing.T) {
	for _, tc := range []struct{ name, port string }{{"Redis", "6767"}, {"Composite", "6768"}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startOwnRedis(t, tc.port)
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + tc.port, ReadTimeout: 600 * time.Millisecond, MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			var told atomic.Int32
			allow := allowOn(t, tc.name, rdb, limiter.Policy{
				OnError:      limiter.FailOpen,
				Backoff:      time.Minute,
				OnRedisError: func(error) { told.Add(1) },
			})
			if d, err := allow(bg); err != nil || !d.Allowed || d.Degraded {
				t.Fatalf("the first call on a healthy Redis: %+v, %v", d, err)
			}
			if err := srv.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			request := func() (limiter.Decision, time.Duration, error) {
				ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
				defer cancel()
				start := time.Now()
				d, err := allow(ctx)
				return d, time.Since(start), err
			}
			for i := 1; i <= 3; i++ {
				// Meets the paused server after its deadline: its
				// context's ending, no decision.
				d1, took1, err1 := request()
				want := int32(0)
				if i == 3 {
					want = 1
				}
				if d1.Allowed || d1.Degraded || !errors.Is(err1, context.DeadlineExceeded) || !errors.Is(err1, limiter.ErrUnavailable) || told.Load() != want {
					t.Fatalf("request %d, whose deadline ended while Redis did not answer: %+v, %v after %v, OnRedisError told %d times;\n"+
						"want no decision, an error matching context.DeadlineExceeded and ErrUnavailable, and OnRedisError told %d times (Policy.DeadlineFailures 3)",
						i, d1, err1, took1.Round(time.Millisecond), told.Load(), want)
				}
			}
			d2, took2, err2 := request() // within the Backoff: FailOpen at once
			if err2 != nil || !d2.Allowed || !d2.Degraded || took2 > 100*time.Millisecond || told.Load() != 1 {
				t.Fatalf("on a paused Redis, with each request's deadline 200ms and the client's read timeout 600ms,\n"+
					"the request after three whose deadline ended: %+v, %v after %v\nOnRedisError told %d times\n"+
					"want it decided by FailOpen at once (Degraded, allowed) in the Backoff the third ending started, and OnRedisError told once",
					d2, err2, took2.Round(time.Millisecond), told.Load())
			}
		})
	}
}

// cancelingScripter ends the caller's context during the call and returns
// the context's own error, as go-redis does when a call is canceled while
// it waits for a connection.
type cancelingScripter struct {
	redis.Scripter
	cancel context.CancelFunc
	calls  atomic.Int32
}

func (s *cancelingScripter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if s.calls.Add(1) > 1 {
		return s.Scripter.EvalSha(ctx, sha, keys, args...)
	}
	s.cancel()
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(ctx.Err())
	return cmd
}

// An error that is the call's own context ending is not a Redis failure
// (Policy.OnRedisError, Backoff): the call gets its context's error, and
// the next call asks Redis.
func TestCallersOwnCancellationStartsNoBackoff(t *testing.T) {
	_, rdb := newMini(t)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	s := &cancelingScripter{Scripter: rdb, cancel: cancel}
	var told atomic.Int32
	l := newRedis(t, s, limiter.RedisConfig{Limit: limiter.PerSecond(10), Policy: limiter.Policy{
		OnError: limiter.FailOpen, Backoff: time.Minute, OnRedisError: func(error) { told.Add(1) },
	}})
	if d, err := l.Allow(ctx, "k"); !errors.Is(err, context.Canceled) || d.Allowed || d.Degraded {
		t.Fatalf("the call whose context ended during it: %+v, %v; want no decision and an error matching context.Canceled", d, err)
	}
	if d, err := l.Allow(bg, "k"); err != nil || !d.Allowed || d.Degraded {
		t.Fatalf("the next call: %+v, %v; want Redis's decision (no Backoff started)", d, err)
	}
	if n := s.calls.Load(); n != 2 {
		t.Fatalf("Redis called %d times, want 2", n)
	}
	if n := told.Load(); n != 0 {
		t.Fatalf("OnRedisError told %d times, want 0", n)
	}
}
