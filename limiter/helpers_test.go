package limiter_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
)

// manualClock is a Clock tests move by hand.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func newManualClock() *manualClock {
	return &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// miniTime is a miniredis whose TIME (read by the scripts) and TTLs move
// only when the test says so.
type miniTime struct {
	mr  *miniredis.Miniredis
	now time.Time
}

func newMini(t *testing.T) (*miniTime, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	m := &miniTime{mr: mr, now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	mr.SetTime(m.now)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return m, rdb
}

// advance moves both the server clock and key expiry forward by d.
func (m *miniTime) advance(d time.Duration) {
	m.now = m.now.Add(d)
	m.mr.SetTime(m.now)
	m.mr.FastForward(d)
}

// backend is a Redis the shared suites run against.
type backend struct {
	name string
	// client returns the backend's client for one subtest, or skips it
	// when the backend's server is not given.
	client func(t *testing.T) redis.UniversalClient
}

// backends returns miniredis (time frozen, one per test t), the real Redis
// and the real Cluster. The last two skip, naming STOCKGUARD_REDIS_ADDR or
// STOCKGUARD_REDIS_CLUSTER, when it is not set.
func backends(t *testing.T) []backend {
	t.Helper()
	_, mini := newMini(t)
	return []backend{
		{"miniredis", func(*testing.T) redis.UniversalClient { return mini }},
		{"redis", func(t *testing.T) redis.UniversalClient {
			rdb := redis.NewClient(&redis.Options{Addr: testdb.Need(t, testdb.Redis), PoolSize: 64})
			t.Cleanup(func() { _ = rdb.Close() })
			return rdb
		}},
		{"cluster", func(t *testing.T) redis.UniversalClient {
			rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(testdb.Need(t, testdb.Cluster), ","), PoolSize: 64})
			t.Cleanup(func() { _ = rdb.Close() })
			return rdb
		}},
	}
}

var prefixSeq atomic.Int64

// prefix returns a key prefix no other test or run uses.
func prefix(t testing.TB) string {
	name := strings.NewReplacer("/", ".", " ", "_", "{", "(", "}", ")").Replace(t.Name())
	return "lt:" + name + ":" + strconv.FormatInt(time.Now().UnixNano(), 36) + "." + strconv.FormatInt(prefixSeq.Add(1), 36)
}

// countAllowed runs calls goroutines of call at once and returns how many
// were allowed; any error fails the test.
func countAllowed(t *testing.T, calls int, call func(i int) (bool, error)) int {
	t.Helper()
	var (
		allowed atomic.Int64
		wg      sync.WaitGroup
		start   = make(chan struct{})
		errs    = make(chan error, calls)
	)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := call(i)
			if err != nil {
				errs <- err
				return
			}
			if ok {
				allowed.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return int(allowed.Load())
}

var bg = context.Background()
