package limiter_test

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/limiter"
)

// A paused Redis is detected also through go-redis's default client
// (MaxRetries 3, ReadTimeout 3s, as examples/basic builds it), whose retry
// after a read timeout waits on the caller's context, so each call ends
// with context.DeadlineExceeded: Policy.DeadlineFailures (default 3) such
// calls in a row are a Redis failure, which starts the Backoff and is
// told to OnRedisError once; each call whose deadline ended gets no
// decision and its context's error.
func TestPausedRedisWithDefaultClientStartsTheBackoffAfterDeadlineFailures(t *testing.T) {
	for _, tc := range []struct{ name, port string }{{"Redis", "6765"}, {"Composite", "6766"}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startOwnRedis(t, tc.port)
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + tc.port})
			t.Cleanup(func() { _ = rdb.Close() })
			var told atomic.Int32
			p := limiter.Policy{OnError: limiter.FailOpen, Backoff: time.Minute, OnRedisError: func(error) { told.Add(1) }}
			allow := allowOn(t, tc.name, rdb, p)
			if d, err := allow(bg); err != nil || !d.Allowed || d.Degraded {
				t.Fatalf("first call on a healthy Redis: %+v, %v", d, err)
			}
			if err := srv.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 3; i++ {
				ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
				d1, err1 := allow(ctx)
				cancel()
				if d1.Allowed || d1.Degraded || !errors.Is(err1, context.DeadlineExceeded) {
					t.Fatalf("call %d, whose deadline ended on a paused Redis: %+v, %v; want no decision, an error matching context.DeadlineExceeded", i, d1, err1)
				}
				want := int32(0)
				if i == 3 {
					want = 1
				}
				if n := told.Load(); n != want {
					t.Errorf("OnRedisError told %d times after %d calls the paused Redis did not answer (error %v), want %d", n, i, err1, want)
				}
			}
			// Within the Backoff the next call is decided by FailOpen without
			// calling Redis: its context has no deadline, so reaching Redis
			// would block until the read timeout (3s) instead.
			ctx2, cancel2 := context.WithTimeout(bg, 100*time.Millisecond)
			d2, err2 := allow(ctx2)
			cancel2()
			if err2 != nil || !d2.Allowed || !d2.Degraded {
				t.Errorf("the next call, within the Backoff the failure should have started: %+v, %v; want FailOpen's decision (Allowed, Degraded)", d2, err2)
			}
		})
	}
}
