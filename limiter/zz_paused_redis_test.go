package limiter_test

import (
	"context"
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

// A Redis that stops answering (paused) is a Redis failure, whatever the
// caller's deadline: Policy.Backoff is "how long, after a Redis failure,
// calls skip Redis and go straight to the Fallback or OnError mode, so a
// down Redis does not cost every request a timeout", and OnRedisError "is
// told of every Redis failure". A request whose own deadline is shorter
// than the client's read timeout (an HTTP handler's budget) may get its
// context's error, but the failure it met must still start the Backoff:
// the next request is decided by FailOpen at once. Instead the failure is
// taken for the caller's cancellation (its context has ended by the time
// the read times out): no Backoff starts, OnRedisError is not told, and
// every request waits out the paused server and gets an error, never the
// FailOpen decision.
func TestZZPausedRedisStartsTheBackoffWhateverTheCallersDeadline(t *testing.T) {
	srv := startOwnRedis(t, "6541")
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6541", ReadTimeout: 600 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	var told atomic.Int32
	l, err := limiter.NewRedis(rdb, limiter.RedisConfig{
		Limit: limiter.Limit{Rate: 100, Period: time.Minute},
		Policy: limiter.Policy{
			OnError:      limiter.FailOpen,
			Backoff:      time.Minute,
			OnRedisError: func(error) { told.Add(1) },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.Allow(bg, "k"); err != nil || !d.Allowed || d.Degraded {
		t.Fatalf("the first call on a healthy Redis: %+v, %v", d, err)
	}
	if err := srv.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	request := func() (limiter.Decision, error, time.Duration) {
		ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		d, err := l.Allow(ctx, "k")
		return d, err, time.Since(start)
	}
	d1, err1, took1 := request() // meets the paused server: an error is fine
	d2, err2, took2 := request() // within the Backoff: FailOpen at once
	if err2 != nil || !d2.Allowed || !d2.Degraded || took2 > 100*time.Millisecond || told.Load() == 0 {
		t.Fatalf("on a paused Redis, with each request's deadline 200ms and the client's read timeout 600ms:\n"+
			"first request:  %+v, %v after %v\nsecond request: %+v, %v after %v\nOnRedisError told %d times\n"+
			"want the second decided by FailOpen at once (Degraded, allowed) in the Backoff the first request's failure started, and OnRedisError told of it",
			d1, err1, took1.Round(time.Millisecond), d2, err2, took2.Round(time.Millisecond), told.Load())
	}
}
