package stockguard_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
)

// The README's first block, on an in-process Redis (miniredis) and SQLite
// instead of a Redis server and MariaDB or PostgreSQL: only the two lines
// that open the clients differ.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	dir, err := os.MkdirTemp("", "shop")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	shop, err := stockguard.New(rdb, db, stockguard.Config{})
	if err != nil {
		panic(err)
	}
	defer shop.Close()
	err = shop.CreateTables(ctx)
	go shop.Run(ctx) // returns unpaid holds, reconciles Redis with the database, recalibrates after an outage
	err = shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 100, PerUserLimit: 1, HoldTTL: 15 * time.Minute})
	err = shop.Deduct(ctx, stock.Order{ID: "order-42", UserID: "alice",
		Items: []stock.Item{{SKU: "phone", Qty: 1}}})
	switch {
	case errors.Is(err, stock.ErrSoldOut), errors.Is(err, stock.ErrLimitReached):
		// tell the buyer
	case errors.Is(err, stock.ErrUnknownOutcome):
		// retry Deduct with the same order: it never takes twice
	}
	err = shop.Confirm(ctx, "order-42") // paid; or shop.Revert(ctx, "order-42") to cancel

	fmt.Println("confirm:", err)
	lv, _ := shop.Levels(ctx, "phone")
	fmt.Println("available:", lv.Available, "sold:", lv.Sold)
	err = shop.Deduct(ctx, stock.Order{ID: "order-43", UserID: "alice", Items: []stock.Item{{SKU: "phone", Qty: 1}}})
	fmt.Println("alice again:", err)
	// Output:
	// confirm: <nil>
	// available: 99 sold: 1
	// alice again: order "order-43": stock: per-user limit reached: SKU "phone"
}
