package limiter_test

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/limiter"
)

// limit is HTTP middleware that admits a request only if both its user and
// its client IP are within their limits, checked in one Redis round trip.
func limit(c *limiter.Composite, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, _, _ := net.SplitHostPort(r.RemoteAddr)
		d, err := c.Allow(r.Context(), limiter.Request{
			Tag:    "api", // one hash slot for this limiter's counters
			Values: []string{r.Header.Get("X-User"), ip},
		})
		if err == nil {
			// Seconds until every counter of the call is full again.
			w.Header().Set("RateLimit-Reset", strconv.Itoa(int(math.Ceil(d.ResetAfter.Seconds()))))
		}
		switch {
		case err != nil:
			http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
		case !d.Allowed:
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.RetryAfter.Seconds()))))
			http.Error(w, "too many requests ("+d.DeniedBy+")", http.StatusTooManyRequests)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func Example_middleware() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	c, err := limiter.NewComposite(rdb, limiter.CompositeConfig{
		Algorithm: limiter.FixedWindow,
		Dimensions: []limiter.Dimension{
			{Name: "user", Limit: limiter.PerMinute(2)},
			{Name: "ip", Limit: limiter.PerMinute(3)},
		},
		Policy: limiter.Policy{OnError: limiter.FailClosed},
	})
	if err != nil {
		panic(err)
	}
	h := limit(c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}))

	for _, user := range []string{"alice", "alice", "alice", "bob", "carol"} {
		req := httptest.NewRequest(http.MethodGet, "/buy", nil)
		req.RemoteAddr = "203.0.113.7:5555"
		req.Header.Set("X-User", user)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Printf("%s %d retry=%s reset=%s %s\n", user, rec.Code, rec.Header().Get("Retry-After"),
			rec.Header().Get("RateLimit-Reset"), strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// alice 200 retry= reset=60 ok
	// alice 200 retry= reset=60 ok
	// alice 429 retry=60 reset=60 too many requests (user)
	// bob 200 retry= reset=60 ok
	// carol 429 retry=60 reset=60 too many requests (ip)
}

// Support tooling (or a test) clears one user's count: the user is
// admitted again as a new user would be.
func ExampleRedis_Reset() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	l, err := limiter.NewRedis(rdb, limiter.RedisConfig{Limit: limiter.Limit{Rate: 3, Period: time.Hour}})
	if err != nil {
		panic(err)
	}
	d, _ := l.AllowN(ctx, "user:42", 3)
	fmt.Println(d.Allowed, d.Remaining, "full again in", d.ResetAfter.Round(time.Minute))
	d, _ = l.Allow(ctx, "user:42")
	fmt.Println(d.Allowed, "retry in", d.RetryAfter.Round(time.Minute), "full again in", d.ResetAfter.Round(time.Minute))

	if err := l.Reset(ctx, "user:42"); err != nil {
		panic(err)
	}
	d, _ = l.Allow(ctx, "user:42")
	fmt.Println(d.Allowed, d.Remaining, "full again in", d.ResetAfter.Round(time.Minute))
	// Output:
	// true 0 full again in 1h0m0s
	// false retry in 20m0s full again in 1h0m0s
	// true 2 full again in 20m0s
}
