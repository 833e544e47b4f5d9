package degrade_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A Redis gate that lost its data answers Deduct with ErrUnavailable
// (nothing applied, use another tier) but UserUnits with ErrUnknownSKU, a
// business answer: degrade.UserUnits then returns "unknown SKU" instead of
// asking the fallback, which knows the SKU and the user's units.
func TestUserUnitsAsksTheFallbackWhenTheGateLostItsData(t *testing.T) {
	for _, name := range []string{"miniredis", "redis"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clock := stocktest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
			var rdb *redis.Client
			var flush func()
			if name == "miniredis" {
				mr := miniredis.RunT(t)
				rdb = redis.NewClient(&redis.Options{Addr: mr.Addr()})
				flush = mr.FlushAll
			} else {
				addr := testdb.Need(t, testdb.Redis)
				rdb = redis.NewClient(&redis.Options{Addr: addr})
			}
			defer rdb.Close()
			prefix := testdb.Unique("rv")
			gate, err := redisstock.New(rdb, redisstock.Config{Clock: clock, Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			if flush == nil { // a shared server: drop only this test's keys
				flush = func() {
					keys, _ := rdb.Keys(ctx, prefix+"*").Result()
					if len(keys) > 0 {
						rdb.Del(ctx, keys...)
					}
				}
			}
			record, err := sqlstock.New(testdb.SQLite(t, 4).DB, sqlstock.Config{Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			if err := record.CreateTables(ctx); err != nil {
				t.Fatal(err)
			}
			l := stock.Listing{SKU: "tv", Units: 10, PerUserLimit: 3, HoldTTL: time.Minute}
			for _, m := range []stock.Manager{gate, record} {
				if err := m.PutOnSale(ctx, l); err != nil {
					t.Fatal(err)
				}
				if err := m.Deduct(ctx, stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "tv", Qty: 2}}}); err != nil {
					t.Fatal(err)
				}
			}
			flush()
			derr := gate.Deduct(ctx, stock.Order{ID: "o2", UserID: "u1", Items: []stock.Item{{SKU: "tv", Qty: 1}}})
			_, uerr := gate.UserUnits(ctx, "tv", "u1")
			t.Logf("after the flush: gate Deduct: %v (%v); gate UserUnits: %v (%v)", derr, observe.Classify(derr), uerr, observe.Classify(uerr))
			if errors.Is(derr, stock.ErrUnavailable) && errors.Is(uerr, stock.ErrUnknownSKU) {
				t.Errorf("redisstock.UserUnits of a SKU whose state the gate lost answers %v; Deduct says %v", uerr, derr)
			}
			d := mustNew(t, gate, record, degrade.Config{})
			defer d.Close()
			n, err := d.UserUnits(ctx, "tv", "u1")
			t.Logf("degrade.UserUnits: %d, %v", n, err)
			if err != nil || n != 2 {
				t.Errorf("degrade.UserUnits = %d, %v; the fallback holds 2 units of u1", n, err)
			}
		})
	}
}
