package redisstock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

func Example() {
	mr, err := miniredis.Run() // any Redis: standalone, Sentinel or Cluster
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	store, err := redisstock.New(client, redisstock.Config{Prefix: "shop"})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	// Warm up: 100 units, at most 2 per user, 15 minutes to pay.
	_ = store.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 100, PerUserLimit: 2, HoldTTL: 15 * time.Minute})

	order := stock.Order{ID: "order-1", UserID: "alice", Items: []stock.Item{{SKU: "phone", Qty: 2}}}
	fmt.Println("deduct:", store.Deduct(ctx, order))
	fmt.Println("retry: ", store.Deduct(ctx, order)) // same ID: takes nothing more
	err = store.Deduct(ctx, stock.Order{ID: "order-2", UserID: "alice", Items: []stock.Item{{SKU: "phone", Qty: 1}}})
	fmt.Println("limit: ", errors.Is(err, stock.ErrLimitReached))
	fmt.Println("paid:  ", store.Confirm(ctx, "order-1"))
	left, _ := store.Available(ctx, "phone")
	fmt.Println("left:  ", left)
	fmt.Println("refund:", store.Revert(ctx, "order-1"))
	left, _ = store.Available(ctx, "phone")
	fmt.Println("left:  ", left)
	// Output:
	// deduct: <nil>
	// retry:  <nil>
	// limit:  true
	// paid:   <nil>
	// left:   98
	// refund: <nil>
	// left:   100
}

func ExampleFailFast() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	// One address: a *redis.Client. Several, or IsClusterMode: a
	// *redis.ClusterClient; MasterName: Sentinel.
	client := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{mr.Addr()}}))
	defer client.Close()

	store, err := redisstock.New(client, redisstock.Config{Prefix: "shop"})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_ = store.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 100, HoldTTL: 15 * time.Minute})
	order := stock.Order{ID: "order-1", UserID: "alice", Items: []stock.Item{{SKU: "phone", Qty: 1}}}
	fmt.Println("deduct:", store.Deduct(ctx, order))
	// Output:
	// deduct: <nil>
}
