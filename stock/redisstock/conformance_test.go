package redisstock_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// backend is a Redis to test against: miniredis always, a real Redis and a
// Redis Cluster when their addresses are set.
type backend struct {
	name string
	// client returns a client for one test; mini is the miniredis behind
	// it, or nil on a real server.
	client func(t *testing.T) (redis.UniversalClient, *miniredis.Miniredis)
}

func backends() []backend {
	bs := []backend{{name: "miniredis", client: func(t *testing.T) (redis.UniversalClient, *miniredis.Miniredis) {
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
	}}}
	if addr := os.Getenv("STOCKGUARD_REDIS_ADDR"); addr != "" {
		bs = append(bs, backend{name: "redis", client: func(t *testing.T) (redis.UniversalClient, *miniredis.Miniredis) {
			c := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { c.Close() })
			return c, nil
		}})
	}
	if addrs := os.Getenv("STOCKGUARD_REDIS_CLUSTER"); addrs != "" {
		bs = append(bs, backend{name: "cluster", client: func(t *testing.T) (redis.UniversalClient, *miniredis.Miniredis) {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
			t.Cleanup(func() { c.Close() })
			return c, nil
		}})
	}
	return bs
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
	s, err := redisstock.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			stocktest.Run(t, func(t *testing.T, clock stock.Clock) stock.Manager {
				c, _ := b.client(t)
				return newStore(t, c, redisstock.Config{Clock: clock})
			})
		})
	}
}
