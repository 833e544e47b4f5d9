package tiered_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

type readerPair struct{ redis, db string }

func readerPairs() []readerPair {
	return []readerPair{{"miniredis", "sqlite"}, {"redis", "mariadb"}, {"redis", "postgres"}}
}

func readerShop(t *testing.T, p readerPair, clock stock.Clock) (*tiered.Manager, *redisstock.Store, *sqlstock.Store) {
	t.Helper()
	var rdb redis.UniversalClient
	if p.redis == "miniredis" {
		mr := miniredis.RunT(t)
		rdb = redis.NewClient(&redis.Options{Addr: mr.Addr()})
	} else {
		addr := testdb.Need(t, testdb.Redis)
		rdb = redis.NewClient(&redis.Options{Addr: addr})
	}
	t.Cleanup(func() { _ = rdb.Close() })
	gate, err := redisstock.New(rdb, redisstock.Config{Clock: clock, Prefix: testdb.Unique("rv")})
	if err != nil {
		t.Fatal(err)
	}
	var db *sqlx.DB
	switch p.db {
	case "sqlite":
		db = testdb.SQLite(t, 4)
	case "mariadb":
		db = testdb.MariaDB(t, 8)
	case "postgres":
		db = testdb.PostgreSQL(t, 8)
	}
	record, err := sqlstock.New(db.DB, sqlstock.Config{Clock: clock, Table: testdb.Unique("rvs"), Ledger: testdb.Unique("rvl")})
	if err != nil {
		t.Fatal(err)
	}
	if err := record.CreateTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tiered.New(gate, record, tiered.Config{Clock: clock}), gate, record
}

// A tiered Revert goes to the gate first, then the record; when the record
// step fails, the gate has reverted the order and the record still holds
// it. The flow then treats the order as closed (Confirm answers
// ErrOrderClosed and returns the record's copy), but Orders reports it as
// held, with a deadline in the future.
func TestOrdersReportsAHoldTheGateRevertedAsReverted(t *testing.T) {
	for _, p := range readerPairs() {
		t.Run(p.redis+"+"+p.db, func(t *testing.T) {
			ctx := context.Background()
			clock := stocktest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
			shop, gate, _ := readerShop(t, p, clock)
			sku := testdb.Unique("sku")
			if err := shop.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 5, HoldTTL: 10 * time.Minute}); err != nil {
				t.Fatal(err)
			}
			o := stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: sku, Qty: 1}}}
			if err := shop.Deduct(ctx, o); err != nil {
				t.Fatal(err)
			}
			// What tiered.Revert leaves when its record step fails.
			if err := gate.Revert(ctx, o.ID); err != nil {
				t.Fatal(err)
			}
			infos, err := shop.Orders(ctx, []string{o.ID})
			if err != nil {
				t.Fatal(err)
			}
			got := infos[0]
			cerr := shop.Confirm(ctx, o.ID)
			t.Logf("Orders: state %v deadline %v; Confirm afterwards: %v", got.State, got.Deadline, cerr)
			if got.State == stock.StateHeld {
				t.Errorf("tiered.Orders reports %v (deadline %v) for an order the gate reverted; the flow's Confirm answers %v", got.State, got.Deadline, cerr)
			}
		})
	}
}

// The gate expired the hold (its reclaimer ran; the record's follow-up has
// not, or failed): the flow treats the order as expired (Confirm answers
// ErrHoldExpired), but Orders reports it held.
func TestOrdersReportsAHoldTheGateExpiredAsExpired(t *testing.T) {
	for _, p := range readerPairs() {
		t.Run(p.redis+"+"+p.db, func(t *testing.T) {
			ctx := context.Background()
			clock := stocktest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
			shop, gate, _ := readerShop(t, p, clock)
			sku := testdb.Unique("sku")
			if err := shop.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 5, HoldTTL: 10 * time.Minute}); err != nil {
				t.Fatal(err)
			}
			o := stock.Order{ID: "o2", UserID: "u1", Items: []stock.Item{{SKU: sku, Qty: 1}}}
			if err := shop.Deduct(ctx, o); err != nil {
				t.Fatal(err)
			}
			clock.Advance(11 * time.Minute) // past the gate's deadline, within the record's grace
			if _, err := gate.ReclaimExpired(ctx, 100); err != nil {
				t.Fatal(err)
			}
			infos, err := shop.Orders(ctx, []string{o.ID})
			if err != nil {
				t.Fatal(err)
			}
			got := infos[0]
			cerr := shop.Confirm(ctx, o.ID)
			t.Logf("Orders: state %v deadline %v; Confirm afterwards: %v", got.State, got.Deadline, cerr)
			if got.State == stock.StateHeld && errors.Is(cerr, stock.ErrHoldExpired) {
				t.Errorf("tiered.Orders reports held for an order the gate expired; Confirm answers %v", cerr)
			}
		})
	}
}

var _ = strings.Contains
