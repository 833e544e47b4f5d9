package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Policy.DeadlineFailures counts "calls in a row ended by their context's
// deadline before Redis answered them, with no Redis reply to any call in
// between". An error reply is a Redis reply (the server ran the script and
// answered): it is told to OnRedisError as a Redis failure of its own, and
// it ends the run. With DeadlineFailures 2, a call ended by its deadline,
// a call Redis answers with an error, then (after the Backoff that error
// started) one more call ended by its deadline are not 2 in a row: the
// last starts no Backoff and is not told; the next call asks Redis.
func TestErrorReplyEndsTheDeadlineRun(t *testing.T) {
	for name, setup := range deadlineCases(2) {
		t.Run(name, func(t *testing.T) {
			c := setup(t)
			rdb := c.s.Scripter.(*redis.Client)
			c.normal(t)
			keys, err := rdb.Keys(bg, "*").Result()
			if err != nil || len(keys) == 0 {
				t.Fatalf("the limiter's keys: %v, %v", keys, err)
			}
			key := keys[0]
			c.impatient(t, context.DeadlineExceeded)
			c.wantTold(t, 0)
			// A key of the wrong type: Redis answers the script with an error.
			if err := rdb.Del(bg, key).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.HSet(bg, key, "f", "v").Err(); err != nil {
				t.Fatal(err)
			}
			if d, err := c.allow(bg); err != nil || !d.Degraded {
				t.Fatalf("the call Redis answered with an error: %+v, %v; want FailOpen's decision", d, err)
			}
			c.wantTold(t, 1)
			if err := rdb.Del(bg, key).Err(); err != nil {
				t.Fatal(err)
			}
			c.clock.Advance(2 * time.Minute) // past the Backoff the error reply started
			c.impatient(t, context.DeadlineExceeded)
			if got := c.told.Load(); got != 1 {
				t.Fatalf("deadline ending, error reply from Redis, deadline ending: OnRedisError told %d times, want 1 (the error reply only): the reply in between ends the run", got)
			}
			c.normal(t)
		})
	}
}
