package tiered_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A sale through both tiers: the Redis gate admits each order, the SQL
// record keeps it. One buyer pays, one cancels, one never pays and the
// reclaimer returns that hold at both tiers once its deadline has passed.
// Here the gate runs on an in-process miniredis and the record on SQLite;
// a shop passes its own Redis client and database. The clock is a fake
// one, moved by hand, so the hold expires without waiting.
func Example() {
	ctx := context.Background()
	clock := stocktest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))

	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	gate, err := redisstock.New(rdb, redisstock.Config{Clock: clock})
	if err != nil {
		log.Fatal(err)
	}

	dir, err := os.MkdirTemp("", "tiered-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	record, err := sqlstock.New(db, sqlstock.Config{Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	if err := record.CreateTables(ctx); err != nil {
		log.Fatal(err)
	}

	shop := tiered.New(gate, record, tiered.Config{Clock: clock})
	levels := func() {
		g, err := shop.Levels(ctx, "phone")
		if err != nil {
			log.Fatal(err)
		}
		r, err := shop.Record().Levels(ctx, "phone")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("gate:   available %d, held %d, sold %d\n", g.Available, g.Held, g.Sold)
		fmt.Printf("record: available %d, held %d, sold %d\n", r.Available, r.Held, r.Sold)
	}

	// The gate holds for 15 minutes, the record longer (by
	// Config.RecordGrace, by default as long again): the gate decides
	// when a hold ends.
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, PerUserLimit: 2, HoldTTL: 15 * time.Minute}); err != nil {
		log.Fatal(err)
	}
	buy := func(orderID, user string, qty int64) error {
		return shop.Deduct(ctx, stock.Order{ID: orderID, UserID: user, Items: []stock.Item{{SKU: "phone", Qty: qty}}})
	}
	fmt.Println("ann buys 2:", buy("o-1", "ann", 2), shop.Confirm(ctx, "o-1"))
	fmt.Println("bob buys 1 and cancels:", buy("o-2", "bob", 1), shop.Revert(ctx, "o-2"))
	fmt.Println("cy buys 1:", buy("o-3", "cy", 1))
	levels()

	// Cy never pays. Past the gate's deadline, any node's reclaimer
	// returns the hold at the gate and the record's copy with it.
	clock.Advance(16 * time.Minute)
	returned, err := shop.ReclaimExpired(ctx, 100)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range returned {
		fmt.Printf("returned: %s of %s, %d %s\n", r.OrderID, r.UserID, r.Qty, r.SKU)
	}
	levels()
	// Output:
	// ann buys 2: <nil> <nil>
	// bob buys 1 and cancels: <nil> <nil>
	// cy buys 1: <nil>
	// gate:   available 7, held 1, sold 2
	// record: available 7, held 1, sold 2
	// returned: o-3 of cy, 1 phone
	// gate:   available 8, held 0, sold 2
	// record: available 8, held 0, sold 2
}
