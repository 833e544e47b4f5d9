package stockguard_test

import (
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A Shop as the README builds it, on MariaDB, with Record.LockWait 1s: a
// Deduct behind a row another transaction holds FOR UPDATE answers within
// the record's answer bound (sqlstock Store.AnswerBound, three LockWaits,
// which the fault matrix's lock-storm cell checks). The record gives up
// after two lock waits; the gate already holds the order, so the answer is
// an unknown outcome, and the breaker does not send the order to the flow
// a second time within the call (which would wait two more): the retry
// with the same order, once the lock is gone, takes it.
func TestShopOnMariaDBHonoursLockWait(t *testing.T) {
	dsn := os.Getenv("STOCKGUARD_MYSQL_DSN")
	if dsn == "" {
		t.Skip("STOCKGUARD_MYSQL_DSN not set")
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	t.Cleanup(func() {
		for _, tb := range []string{"shoplw_stock", "shoplw_ledger", "shoplw_ledger_ops", "shoplw_ledger_returns"} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tb)
		}
	})
	shop := lockWaitShop(t, db, sqlstock.Config{Table: "shoplw_stock", Ledger: "shoplw_ledger", LockWait: time.Second})
	t.Logf("dialect: %v", shop.Record().Dialect())
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT * FROM shoplw_stock WHERE sku = 'phone' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = shop.Deduct(ctx, order("o1", 1))
	took := time.Since(start)
	t.Logf("deduct behind the lock: %v after %v", err, took)
	wantWithinAnswerBound(t, shop, took)
	if err == nil || stock.IsBusiness(err) {
		t.Errorf("deduct behind the lock: %v, want an error to retry", err)
	}
	tx.Rollback()
	if err := shop.Deduct(ctx, order("o1", 1)); err != nil {
		t.Errorf("retry once the lock is gone: %v", err)
	}
}

// The same on SQLite (no server needed): another connection holds the
// write lock; a Deduct through the Shop with Record.LockWait 1s must answer
// within the record's answer bound.
func TestShopOnSQLiteHonoursLockWait(t *testing.T) {
	db := testdb.SQLite(t, 4).DB
	shop := lockWaitShop(t, db, sqlstock.Config{LockWait: time.Second})
	ctx := t.Context()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = shop.Deduct(ctx, order("o1", 1))
	took := time.Since(start)
	_, _ = conn.ExecContext(ctx, "ROLLBACK")
	t.Logf("deduct behind the write lock: %v after %v", err, took)
	wantWithinAnswerBound(t, shop, took)
}

// lockWaitShop is a Shop on db with the record's Config rec, its gate a
// FailFast client of a miniredis, with its tables and 10 units of
// "phone" on sale.
func lockWaitShop(t *testing.T, db *sql.DB, rec sqlstock.Config) *stockguard.Shop {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{mr.Addr()}}))
	t.Cleanup(func() { rdb.Close() })
	shop, err := stockguard.New(rdb, db, stockguard.Config{Record: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shop.Close)
	if err := shop.CreateTables(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := shop.PutOnSale(t.Context(), stock.Listing{SKU: "phone", Units: 10}); err != nil {
		t.Fatal(err)
	}
	return shop
}

// wantWithinAnswerBound checks that a Deduct behind a held lock, with
// Record.LockWait 1s, took no longer than the record's answer bound and
// round trips.
func wantWithinAnswerBound(t *testing.T, shop *stockguard.Shop, took time.Duration) {
	t.Helper()
	if bound := shop.Record().AnswerBound() + 500*time.Millisecond; took > bound {
		t.Errorf("a Deduct behind a held lock took %v with LockWait 1s (the record's answer bound and round trips: %v)", took, bound)
	}
}
