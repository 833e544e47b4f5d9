package redisstock_test

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A Ring shards keys by their hash tag with its own hash, not by slot: the
// Store must run every script on one SKU's keys only.
func TestConformanceRing(t *testing.T) {
	stocktest.Run(t, func(t *testing.T, clock stock.Clock) stock.Manager {
		a, b := miniredis.RunT(t), miniredis.RunT(t)
		c := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
		t.Cleanup(func() { c.Close() })
		return newStore(t, c, redisstock.Config{Clock: clock})
	})
}
