package redisstock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// backend is a Redis to test against: miniredis always, a real Redis and a
// Redis Cluster when their addresses are set (without them, they skip).
type backend struct {
	name string
	// needs is the real server the backend runs on: none for miniredis.
	needs []testdb.Server
	// client returns a client for one test, or skips it without the
	// server; mini is the miniredis behind it, or nil on a real server.
	client func(t *testing.T) (redis.UniversalClient, *miniredis.Miniredis)
}

func backends() []backend {
	return []backend{{name: "miniredis", client: func(t *testing.T) (redis.UniversalClient, *miniredis.Miniredis) {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { c.Close() })
		return c, m
	}}, {name: "miniredis-cluster", client: func(t *testing.T) (redis.UniversalClient, *miniredis.Miniredis) {
		// One node owning every slot: the Store still groups an order's
		// lines by slot, so the cross-slot paths run without a cluster.
		m := miniredis.RunT(t)
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{m.Addr()}})
		t.Cleanup(func() { c.Close() })
		return c, m
	}}, {name: "redis", needs: []testdb.Server{testdb.Redis}, client: func(t *testing.T) (redis.UniversalClient, *miniredis.Miniredis) {
		c := redis.NewClient(&redis.Options{Addr: testdb.Need(t, testdb.Redis)})
		t.Cleanup(func() { c.Close() })
		return c, nil
	}}, {name: "cluster", needs: []testdb.Server{testdb.Cluster}, client: func(t *testing.T) (redis.UniversalClient, *miniredis.Miniredis) {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(testdb.Need(t, testdb.Cluster), ",")})
		t.Cleanup(func() { c.Close() })
		return c, nil
	}}}
}

// need skips t when b's server is not given: call it in b's subtest before
// the cases under it, so that it skips once.
func (b backend) need(t *testing.T) {
	t.Helper()
	testdb.Need(t, b.needs...)
}

// dropping holds the test prefixes whose keys a cleanup deletes.
var dropping sync.Map

// dropPrefix deletes a test's keys from a shared server (every master of a
// Cluster) when the test ends, before its client closes.
func dropPrefix(c redis.UniversalClient, prefix string) {
	ctx := context.Background()
	switch c := c.(type) {
	case *redis.Client:
		testdb.DropKeys(ctx, c, prefix+":")
	case *redis.ClusterClient:
		_ = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			testdb.DropKeys(ctx, m, prefix+":")
			return nil
		})
	}
}

// uniquePrefix isolates a test's keys on a shared server.
func uniquePrefix(t *testing.T) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "sgtest-" + hex.EncodeToString(b[:])
}

func newStore(t *testing.T, c redis.UniversalClient, cfg redisstock.Config) *redisstock.Store {
	t.Helper()
	if cfg.Prefix == "" {
		cfg.Prefix = uniquePrefix(t)
	}
	if _, seen := dropping.LoadOrStore(cfg.Prefix, true); !seen && strings.HasPrefix(cfg.Prefix, "sgtest-") {
		t.Cleanup(func() { dropPrefix(c, cfg.Prefix) })
	}
	s, err := redisstock.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			stocktest.Run(t, func(t *testing.T, clock stock.Clock) stock.Manager {
				c, _ := b.client(t)
				return newStore(t, c, redisstock.Config{Clock: clock})
			})
		})
	}
}
