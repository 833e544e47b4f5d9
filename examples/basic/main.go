// Command basic is stockguard in a few lines: put a SKU on sale in Redis,
// hold two units for an order, pay for it, cancel another, and read what is
// left. It runs on an in-process miniredis, so it needs no server.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

func main() {
	ctx := context.Background()
	mr, err := miniredis.Run() // a real shop passes its own Redis client
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	shop, err := redisstock.New(redis.NewClient(&redis.Options{Addr: mr.Addr()}), redisstock.Config{})
	if err != nil {
		log.Fatal(err)
	}

	must(shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, PerUserLimit: 2}))
	must(shop.Deduct(ctx, stock.Order{ID: "order-1", UserID: "ann", Items: []stock.Item{{SKU: "phone", Qty: 2}}}))
	must(shop.Confirm(ctx, "order-1")) // paid: sold for good
	must(shop.Deduct(ctx, stock.Order{ID: "order-2", UserID: "bob", Items: []stock.Item{{SKU: "phone", Qty: 1}}}))
	must(shop.Revert(ctx, "order-2")) // cancelled: the unit goes back

	err = shop.Deduct(ctx, stock.Order{ID: "order-3", UserID: "ann", Items: []stock.Item{{SKU: "phone", Qty: 1}}})
	fmt.Println("ann again:", err) // stock: per-user limit reached

	lv, err := shop.Levels(ctx, "phone")
	must(err)
	fmt.Printf("available %d, held %d, sold %d\n", lv.Available, lv.Held, lv.Sold)
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
