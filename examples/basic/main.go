// Command basic is stockguard in a few lines: a shop (a Redis gate in front
// of a SQL record) puts a SKU on sale, holds two units for an order, is
// paid for it, cancels another, and reads what is left. It runs on an
// in-process miniredis and SQLite in a temporary file, so it needs no
// server; a real shop passes its own Redis client and database.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
)

func main() {
	ctx, mr, dir := context.Background(), miniredis.NewMiniRedis(), fmt.Sprintf("%s/basic-%d.db", os.TempDir(), os.Getpid())
	must(mr.Start())
	defer mr.Close()
	defer os.Remove(dir)
	db, err := sql.Open("sqlite", "file:"+dir)
	must(err)
	shop, err := stockguard.New(redis.NewClient(&redis.Options{Addr: mr.Addr()}), db, stockguard.Config{})
	must(err)
	must(shop.CreateTables(ctx))
	must(shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, PerUserLimit: 2}))
	must(shop.Deduct(ctx, stock.Order{ID: "order-1", UserID: "ann", Items: []stock.Item{{SKU: "phone", Qty: 2}}}))
	must(shop.Confirm(ctx, "order-1")) // paid: sold for good
	must(shop.Deduct(ctx, stock.Order{ID: "order-2", UserID: "bob", Items: []stock.Item{{SKU: "phone", Qty: 1}}}))
	must(shop.Revert(ctx, "order-2")) // cancelled: the unit goes back
	err = shop.Deduct(ctx, stock.Order{ID: "order-3", UserID: "ann", Items: []stock.Item{{SKU: "phone", Qty: 1}}})
	fmt.Println("ann again:", err) // per-user limit reached
	lv, err := shop.Levels(ctx, "phone")
	must(err)
	fmt.Printf("available %d, held %d, sold %d\n", lv.Available, lv.Held, lv.Sold)
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
