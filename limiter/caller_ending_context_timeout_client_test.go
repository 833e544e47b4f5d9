package limiter_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/limiter"
)

// Policy: "An ending by deadline is ambiguous: an impatient caller on a
// healthy Redis, or a Redis that does not answer. One is no Redis failure,
// so that a caller with a short deadline does not put every other caller
// into the Backoff". The client here fails fast as the docs recommend
// (MaxRetries -1) and respects callers' deadlines (go-redis's
// ContextTimeoutEnabled, which sets the connection's deadline to the
// caller's when it is the earlier), so the impatient call meets an i/o
// timeout, possibly before its context's timer has set ctx.Err(). Redis
// stalls (paused) for the one impatient call only, well within the
// client's 5s read timeout, and is answering again before the next call:
// the impatient call gets no decision and an error matching
// context.DeadlineExceeded, the next call is Redis's decision, and
// OnRedisError is never told.
func TestOneImpatientCallerStartsNoBackoffWithContextTimeoutClient(t *testing.T) {
	for _, tc := range []struct{ name, port, stall string }{
		{"Redis/paused", "6760", "SIGSTOP"}, {"Composite/paused", "6761", "SIGSTOP"},
		{"Redis/clientPauseWrite", "6762", "CLIENT PAUSE"}, {"Composite/clientPauseWrite", "6763", "CLIENT PAUSE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startOwnRedis(t, tc.port)
			rdb := redis.NewClient(&redis.Options{
				Addr: "127.0.0.1:" + tc.port, MaxRetries: -1, ReadTimeout: 5 * time.Second,
				ContextTimeoutEnabled: true,
			})
			t.Cleanup(func() { _ = rdb.Close() })
			var told atomic.Int32
			var toldErr atomic.Value
			p := limiter.Policy{OnError: limiter.FailOpen, Backoff: time.Minute, OnRedisError: func(err error) { told.Add(1); toldErr.Store(err.Error()) }}
			allow := allowOn(t, strings.Split(tc.name, "/")[0], rdb, p)
			if d, err := allow(bg); err != nil || !d.Allowed || d.Degraded {
				t.Fatalf("first call on a healthy Redis: %+v, %v", d, err)
			}
			// The stall: the server paused, or a healthy server holding
			// scripts back (CLIENT PAUSE WRITE, as a failover does) while it
			// answers reads.
			admin := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + tc.port})
			t.Cleanup(func() { _ = admin.Close() })
			stall, resume := func() error { return srv.Process.Signal(syscall.SIGSTOP) }, func() error { return srv.Process.Signal(syscall.SIGCONT) }
			if tc.stall == "CLIENT PAUSE" {
				stall = func() error { return admin.Do(bg, "CLIENT", "PAUSE", 60000, "WRITE").Err() }
				resume = func() error { return admin.Do(bg, "CLIENT", "UNPAUSE").Err() }
			}
			if err := stall(); err != nil {
				t.Fatal(err)
			}
			if tc.stall == "CLIENT PAUSE" {
				if err := admin.Ping(bg).Err(); err != nil {
					t.Fatalf("the server does not answer reads while it holds scripts back: %v", err)
				}
			}
			ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
			d1, err1 := allow(ctx)
			cancel()
			if err := resume(); err != nil {
				t.Fatal(err)
			}
			if d1.Allowed || d1.Degraded || !errors.Is(err1, context.DeadlineExceeded) {
				// Seen when the read's timeout (the caller's deadline) returns
				// before the context's own timer has ended it.
				t.Errorf("the impatient call: %+v, %v; want no decision, an error matching context.DeadlineExceeded (DeadlineFailures: \"The call that ends by its deadline is never decided by the policy\")", d1, err1)
			}
			ctx2, cancel2 := context.WithTimeout(bg, 2*time.Second)
			d2, err2 := allow(ctx2)
			cancel2()
			if err2 != nil || !d2.Allowed || d2.Degraded || told.Load() != 0 {
				t.Fatalf("one impatient call (its error: %v), then Redis answers again:\nnext call: %+v, %v\nOnRedisError told %d times (%v)\n"+
					"want the next call decided by Redis (not Degraded) and OnRedisError never told: one call ended by its deadline is no Redis failure",
					err1, d2, err2, told.Load(), toldErr.Load())
			}
		})
	}
}

// Policy.DeadlineFailures: "A call ended by cancellation
// (context.Canceled) never counts"; doc.go: "Cancellation never is" a
// Redis failure. A request canceled (its client went away) while a healthy
// Redis holds scripts back (CLIENT PAUSE WRITE), on a client that fails
// fast and respects callers' deadlines, must not put the other callers
// into the Backoff.
func TestCanceledCallerStartsNoBackoffWithContextTimeoutClient(t *testing.T) {
	const port = "6764"
	startOwnRedis(t, port)
	rdb := redis.NewClient(&redis.Options{
		Addr: "127.0.0.1:" + port, MaxRetries: -1, ReadTimeout: 5 * time.Second,
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	admin := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	t.Cleanup(func() { _ = admin.Close() })
	var told atomic.Int32
	l, err := limiter.NewRedis(rdb, limiter.RedisConfig{Limit: limiter.Limit{Rate: 100, Period: time.Minute}, Policy: limiter.Policy{
		OnError: limiter.FailOpen, Backoff: time.Minute, OnRedisError: func(error) { told.Add(1) },
	}})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.Allow(bg, "k"); err != nil || !d.Allowed || d.Degraded {
		t.Fatalf("first call on a healthy Redis: %+v, %v", d, err)
	}
	if err := admin.Do(bg, "CLIENT", "PAUSE", 60000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	// The request has a 1s budget; its client goes away after 200ms, while
	// its call waits for Redis.
	ctx, cancel := context.WithTimeout(bg, time.Second)
	defer cancel()
	stop := time.AfterFunc(200*time.Millisecond, cancel)
	defer stop.Stop()
	d1, err1 := l.Allow(ctx, "k")
	if err := admin.Do(bg, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	if d1.Allowed || d1.Degraded || !errors.Is(err1, context.Canceled) {
		t.Fatalf("the canceled call: %+v, %v; want no decision, an error matching context.Canceled", d1, err1)
	}
	ctx2, cancel2 := context.WithTimeout(bg, 2*time.Second)
	d2, err2 := l.Allow(ctx2, "k")
	cancel2()
	if err2 != nil || !d2.Allowed || d2.Degraded || told.Load() != 0 {
		t.Fatalf("one canceled call (its error: %v), then Redis answers again:\nnext call: %+v, %v\nOnRedisError told %d times\n"+
			"want the next call decided by Redis (not Degraded) and OnRedisError never told: cancellation is never a Redis failure",
			err1, d2, err2, told.Load())
	}
}
