package reconcile_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// The whole wiring: Redis in front (the tiered flow), the SQL record behind
// it and as the fallback, a breaker around Redis, and a reconciler that
// recalibrates Redis before traffic returns to it. miniredis and SQLite
// stand in for the servers.
func Example() {
	ctx := context.Background()
	clock := stocktest.NewClock(stocktest.Epoch)
	mr, _ := miniredis.Run()
	defer mr.Close()
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	dir, _ := os.MkdirTemp("", "stockguard")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=journal_mode(WAL)")
	defer db.Close()

	gate, _ := redisstock.New(rc, redisstock.Config{Clock: clock})
	record, _ := sqlstock.New(db, sqlstock.Config{Clock: clock})
	_ = record.CreateTables(ctx)
	flow := tiered.New(gate, record, tiered.Config{Clock: clock})
	found := make(chan reconcile.Correction, 16) // the breaker recalibrates in the background
	printFound := func() {
		for len(found) > 0 {
			c := <-found
			fmt.Printf("reconcile %s: Redis %d -> %d (database %d, in flight %d)\n", c.SKU, c.Before, c.After, c.Record, c.InFlight)
		}
	}
	rec, _ := reconcile.New(gate, record, reconcile.Config{
		GateHold:     flow.GateHold, // the record holds longer than the gate
		OnCorrection: func(c reconcile.Correction) { found <- c },
	})
	events := make(chan degrade.Event, 16)
	shop, _ := degrade.New(flow, nil, degrade.Config{ // nil: the flow's record is the fallback
		Recalibrate:   rec.Recalibrate,
		RampSteps:     []float64{},
		OnStateChange: func(e degrade.Event) { events <- e },
		Clock:         clock,
	})
	defer shop.Close()

	_ = record.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 100})
	_, _ = rec.WarmUp(ctx, nil, false) // Redis gets the database's 100
	printFound()
	buy := func(id string) error {
		return shop.Deduct(ctx, stock.Order{ID: id, Items: []stock.Item{{SKU: "phone", Qty: 1}}})
	}
	fmt.Println("o1:", buy("o1"))

	mr.SetError("LOADING Redis is loading the dataset in memory") // Redis fails
	for i := range 5 {
		_ = buy(fmt.Sprint("lost-", i))
	}
	fmt.Println("breaker:", shop.State("phone"))
	fmt.Println("o2:", buy("o2"), "o3:", buy("o3")) // taken by the database alone

	mr.SetError("") // Redis is back; after OpenFor the reconciler runs first
	clock.Advance(10 * time.Second)
	n, _ := shop.Available(ctx, "phone") // still the database; starts the recalibration
	fmt.Println("available:", n)
	for e := range events {
		if e.To == degrade.Primary {
			break
		}
	}
	// What the recalibration found, before traffic returned to Redis.
	printFound()
	fmt.Println("o4:", buy("o4")) // Redis again
	r, _ := gate.Available(ctx, "phone")
	s, _ := record.Available(ctx, "phone")
	fmt.Println("available in Redis:", r, "in the database:", s)
	// Output:
	// reconcile phone: Redis 0 -> 100 (database 100, in flight 0)
	// o1: <nil>
	// breaker: degraded
	// o2: <nil> o3: <nil>
	// available: 97
	// reconcile phone: Redis 99 -> 97 (database 97, in flight 0)
	// o4: <nil>
	// available in Redis: 96 in the database: 96
}
