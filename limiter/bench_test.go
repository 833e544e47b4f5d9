package limiter_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/limiter"
)

// go test -run '^$' -bench 'BenchmarkLocalAllow|BenchmarkBareRateAllow' -benchmem ./limiter
func BenchmarkLocalAllow(b *testing.B) {
	l, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: limiter.MaxRate, Burst: limiter.MaxRate}})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
		_, _ = l.Allow(bg, keys[i])
	}
	var worker atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(worker.Add(1)) * 97
		for pb.Next() {
			d, err := l.Allow(bg, keys[i&1023])
			if err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
			i++
		}
	})
}

// The baseline for BenchmarkLocalAllow, in the same run: one bare
// x/time/rate Limiter (no key lookup), Allow at time.Now.
func BenchmarkBareRateAllow(b *testing.B) {
	l := rate.NewLimiter(rate.Limit(limiter.MaxRate), limiter.MaxRate)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !l.Allow() {
				b.Fatal("refused")
			}
		}
	})
}

// runParallel calls fn n times from g goroutines and returns the time taken.
func runParallel(b *testing.B, n, g int, fn func(i int) error) time.Duration {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		fail atomic.Value
	)
	start := time.Now()
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				if err := fn(i); err != nil {
					fail.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := fail.Load().(error); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// The distributed GCRA against go-redis/redis_rate on the same Redis, in the
// same run, 64 concurrent callers. ratio-1key: redis_rate vs limiter, one
// key per call. ratio-4dims: redis_rate checking four keys (user+SKU, user,
// SKU, IP) in four calls, as it must (and not all-or-nothing), vs the
// Composite deciding the four dimensions in one call. ratio = redis_rate
// time / limiter time (>= 1 means as fast or faster). Rounds are
// interleaved.
//
// STOCKGUARD_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench BenchmarkGCRAVsRedisRate -benchtime 20000x ./limiter
func BenchmarkGCRAVsRedisRate(b *testing.B) {
	addr := testdb.Need(b, testdb.Redis)
	const callers = 64
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: callers})
	defer rdb.Close()
	ctx := context.Background()
	p := prefix(b)
	rr := redis_rate.NewLimiter(rdb)
	rrLimit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Second}
	lim := limiter.Limit{Rate: 1_000_000, Burst: 1_000_000}
	one := newRedis(b, rdb, limiter.RedisConfig{Prefix: p + ":one", Limit: lim})
	four := newComposite(b, rdb, limiter.CompositeConfig{Prefix: p + ":four", Dimensions: []limiter.Dimension{
		{Name: "user_sku", Limit: lim}, {Name: "user", Limit: lim}, {Name: "sku", Limit: lim}, {Name: "ip", Limit: lim},
	}})
	user := func(i int) string { return "u" + strconv.Itoa(i%1000) }
	impls := []struct {
		name string
		fn   func(i int) error
	}{
		{"redis_rate", func(i int) error {
			res, err := rr.Allow(ctx, p+":rr:"+user(i), rrLimit)
			if err == nil && res.Allowed != 1 {
				b.Error("redis_rate refused")
			}
			return err
		}},
		{"redis_rate_4keys", func(i int) error {
			u := user(i)
			for _, k := range []string{"us:" + u + ":sku7", "u:" + u, "s:sku7", "ip:10.0.0." + strconv.Itoa(i%250)} {
				res, err := rr.Allow(ctx, p+":rr:"+k, rrLimit)
				if err != nil {
					return err
				}
				if res.Allowed != 1 {
					b.Error("redis_rate refused")
				}
			}
			return nil
		}},
		{"limiter_1key", func(i int) error {
			d, err := one.Allow(ctx, user(i))
			if err == nil && !d.Allowed {
				b.Error("limiter refused")
			}
			return err
		}},
		{"composite_4dims", func(i int) error {
			u := user(i)
			d, err := four.Allow(ctx, limiter.Request{Tag: "sale", Values: []string{u + ":sku7", u, "sku7", "10.0.0." + strconv.Itoa(i%250)}})
			if err == nil && !d.Allowed {
				b.Error("composite refused")
			}
			return err
		}},
	}
	total := make([]time.Duration, len(impls))
	b.ResetTimer()
	const rounds = 3
	for range rounds {
		for k, im := range impls {
			total[k] += runParallel(b, max(b.N/rounds, 1), callers, im.fn)
		}
	}
	ops := float64(max(b.N/rounds, 1) * rounds)
	for k, im := range impls {
		b.ReportMetric(float64(total[k].Nanoseconds())/ops, im.name+"-ns/op")
	}
	b.ReportMetric(float64(total[0])/float64(total[2]), "ratio-1key")
	b.ReportMetric(float64(total[1])/float64(total[3]), "ratio-4dims")
}
