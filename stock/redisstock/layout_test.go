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

// A prefix written by a Cluster Store (a directory of 16 shards) and then
// served by a single server's Store (the data moved) keeps its shard count
// when the registry key alone is lost: the Store finds the other shards'
// keys, so a held order's ID stays bound. (The other way round, see
// TestReviewHotLostRegistryForgetsTheShardCount.)
func TestLostRegistryKeepsTheWideDirectory(t *testing.T) {
	m := miniredis.RunT(t)
	single := redis.NewClient(&redis.Options{Addr: m.Addr()})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{m.Addr()}})
	t.Cleanup(func() { single.Close(); cluster.Close() })
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	prefix := uniquePrefix(t)
	a := newStore(t, cluster, redisstock.Config{Prefix: prefix, Clock: clock})
	b := newStore(t, single, redisstock.Config{Prefix: prefix, Clock: clock})
	shared := b.DirKey("") // a directory of one shard: its shard 0
	for _, sku := range []string{"a", "b"} {
		if err := a.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10, HoldTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	// An order ID whose entry is not in shard 0, which the two counts share.
	id := ""
	for i := 0; id == ""; i++ {
		if c := "o" + string(rune('a'+i)); a.DirKey(c) != shared {
			id = c
		}
	}
	is(t, a.Deduct(ctx, ord(id, "u1", it("a", 1))), nil, "Deduct (Cluster)")
	if err := single.Del(ctx, prefix+":skus").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Rebuild(ctx, []redisstock.Rebuild{{Listing: stock.Listing{SKU: "a", Units: 9, HoldTTL: time.Minute}},
		{Listing: stock.Listing{SKU: "b", Units: 10, HoldTTL: time.Minute}}}); err != nil {
		t.Fatal(err)
	}
	is(t, b.Deduct(ctx, ord(id, "u2", it("b", 1))), stock.ErrConflict, "the ID with other items, on one server")
	is(t, b.Confirm(ctx, id), nil, "Confirm the held order")
}
