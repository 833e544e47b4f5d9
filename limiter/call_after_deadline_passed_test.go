package limiter_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/limiter"
)

// pastDeadline is a caller's context whose deadline has passed before the
// call is made, while Err is still nil (its timer has not fired yet, as on
// a busy process): an ended context by the Policy's own words, "ctx.Err()
// is set, or its deadline has passed".
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// countingScripter counts the calls that reach it and fails each as a read
// timeout would.
type countingScripter struct {
	redis.Scripter
	asked atomic.Int32
}

func (s *countingScripter) fail(ctx context.Context) *redis.Cmd {
	s.asked.Add(1)
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(readTimeout)
	return cmd
}

func (s *countingScripter) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return s.fail(ctx)
}

func (s *countingScripter) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return s.fail(ctx)
}

// Policy.DeadlineFailures: "A call ended by cancellation (context.Canceled)
// never counts, nor does a call whose context had ended before it was
// made (Redis is not asked)"; limiter doc: "a call on an ended context
// counts nothing and is never decided by the policy, whether Redis is
// called or skipped during the Backoff". With DeadlineFailures 1, a call
// made after its deadline passed must not reach Redis, start the Backoff
// or be told to OnRedisError; made during the Backoff, it must get no
// FailOpen decision but an error matching context.DeadlineExceeded.
func TestCallMadeAfterItsDeadlinePassedIsNotMade(t *testing.T) {
	setup := func(t *testing.T) (*limiter.Redis, *countingScripter, *atomic.Int32) {
		_, rdb := newMini(t)
		s := &countingScripter{Scripter: rdb}
		told := new(atomic.Int32)
		l := newRedis(t, s, limiter.RedisConfig{Limit: limiter.PerSecond(1000), Policy: limiter.Policy{
			OnError: limiter.FailOpen, Backoff: time.Minute, Clock: newManualClock(), DeadlineFailures: 1,
			OnRedisError: func(error) { told.Add(1) },
		}})
		return l, s, told
	}
	t.Run("Redis asked", func(t *testing.T) {
		l, s, told := setup(t)
		d, err := l.Allow(pastDeadline{bg}, "k")
		if n := s.asked.Load(); n != 0 || told.Load() != 0 || d.Allowed || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("call made after its deadline passed: Redis asked %d times, OnRedisError told %d times, %+v, %v; want Redis not asked, nothing told, no decision, an error matching DeadlineExceeded", n, told.Load(), d, err)
		}
	})
	t.Run("within the Backoff", func(t *testing.T) {
		l, s, told := setup(t)
		// A live failure starts the Backoff (FailOpen decides it).
		if d, err := l.Allow(bg, "k"); err != nil || !d.Degraded || s.asked.Load() != 1 || told.Load() != 1 {
			t.Fatalf("live failure with FailOpen: %+v, %v", d, err)
		}
		d, err := l.Allow(pastDeadline{bg}, "k")
		if d.Allowed || d.Degraded || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("call made after its deadline passed, within the Backoff: %+v, %v; want no policy decision, an error matching DeadlineExceeded", d, err)
		}
	})
}
