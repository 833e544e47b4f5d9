package tiered_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// forgetfulGate is a redisstock gate on miniredis that forgets an ended
// order after redisstock.MinRetention, and step, which moves the test's
// clock and the server's together (its TIME and its TTLs).
func forgetfulGate(t *testing.T, clock *stocktest.Clock) (*redisstock.Store, func(time.Duration)) {
	t.Helper()
	mr := miniredis.RunT(t)
	mr.SetTime(clock.Now())
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	gate, err := redisstock.New(rdb, redisstock.Config{Clock: clock, Prefix: testdb.Unique("fg"), Retention: redisstock.MinRetention})
	if err != nil {
		t.Fatal(err)
	}
	return gate, func(d time.Duration) {
		clock.Advance(d)
		mr.SetTime(clock.Now())
		mr.FastForward(d)
	}
}
