package redisstock_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// The directory's shard count lives only in the registry's layout mark. A
// prefix created with one shard (a single server's Store) and served by a
// Cluster Store (the data moved to a Cluster: the shard is a legal
// Cluster key; the Store follows the mark) loses its count when the
// registry key alone is lost (its master lost its data, or it was
// evicted, cases the package handles elsewhere): a Store that starts then
// takes its client's default, 16 shards, and looks for entries where none
// are. The held order's ID is free to it: another order binds it with
// other items while the first still holds stock under it.
func TestReviewHotLostRegistryForgetsTheShardCount(t *testing.T) {
	m := miniredis.RunT(t)
	single := redis.NewClient(&redis.Options{Addr: m.Addr()})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{m.Addr()}})
	t.Cleanup(func() { single.Close(); cluster.Close() })
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	prefix := uniquePrefix(t)
	a := newStore(t, single, redisstock.Config{Prefix: prefix, Clock: clock})
	for _, sku := range []string{"a", "b"} {
		if err := a.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10, HoldTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	is(t, a.Deduct(ctx, ord("o1", "u1", it("a", 1))), nil, "Deduct o1 (one server)")
	// The Cluster Store follows the prefix's count.
	b := newStore(t, cluster, redisstock.Config{Prefix: prefix, Clock: clock})
	is(t, b.Deduct(ctx, ord("o1", "u2", it("b", 1))), stock.ErrConflict, "o1 with other items, the mark read")
	// The registry key alone is lost; a reconciler's rebuild brings it back.
	if err := cluster.Del(ctx, prefix+":skus").Err(); err != nil {
		t.Fatal(err)
	}
	c := newStore(t, cluster, redisstock.Config{Prefix: prefix, Clock: clock})
	if _, err := c.Rebuild(ctx, []redisstock.Rebuild{{Listing: stock.Listing{SKU: "a", Units: 9, HoldTTL: time.Minute}},
		{Listing: stock.Listing{SKU: "b", Units: 10, HoldTTL: time.Minute}}}); err != nil {
		t.Fatal(err)
	}
	err := c.Deduct(ctx, ord("o1", "u2", it("b", 1)))
	if err == nil {
		lv, _ := c.Levels(ctx, "b")
		t.Errorf("o1 with other items bound while o1 holds 1 of a: two orders under one ID (b: %+v)", lv)
	}
}
