package stockguard_test

import (
	"database/sql"
	"errors"
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
// Deduct behind a row another transaction holds FOR UPDATE must answer
// within the record's answer bound (sqlstock.Config.LockWait: "every call
// answers within three [LockWaits]"; the fault matrix's lock-storm cell,
// which builds its nodes with stockguard.New: "bound 3.5s per call"; the
// README: "bound 2.5s per call"). The Shop answers after four: the record
// gives up after two lock waits, the flow reports that as an unknown
// outcome because the gate already holds the order, and the breaker
// re-places the order on the flow at once, which waits two more.
func TestZZShopOnMariaDBHonoursLockWait(t *testing.T) {
	dsn := os.Getenv("STOCKGUARD_MYSQL_DSN")
	if dsn == "" {
		t.Skip("STOCKGUARD_MYSQL_DSN not set")
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	mr := miniredis.RunT(t)
	rdb := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{mr.Addr()}}))
	t.Cleanup(func() { rdb.Close() })
	shop, err := stockguard.New(rdb, db, stockguard.Config{Record: sqlstock.Config{Table: "zzrv1_stock", Ledger: "zzrv1_ledger", LockWait: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shop.Close)
	ctx := t.Context()
	if err := shop.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tb := range []string{"zzrv1_stock", "zzrv1_ledger", "zzrv1_ledger_ops", "zzrv1_ledger_returns"} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tb)
		}
	})
	t.Logf("dialect: %v", shop.Record().Dialect())
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10}); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT * FROM zzrv1_stock WHERE sku = 'phone' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = shop.Deduct(ctx, order("o1", 1))
	took := time.Since(start)
	t.Logf("deduct behind the lock: %v after %v", err, took)
	if bound := shop.Record().AnswerBound() + 500*time.Millisecond; took > bound {
		t.Errorf("a Deduct behind a locked row took %v with LockWait 1s (the record's answer bound and round trips: %v)", took, bound)
	}
	if err == nil || stock.IsBusiness(err) {
		t.Errorf("deduct behind the lock: %v, want an error to retry", err)
	}
	tx.Rollback()
	if errors.Is(err, stock.ErrUnknownOutcome) {
		if err := shop.Deduct(ctx, order("o1", 1)); err != nil {
			t.Errorf("retry once the lock is gone: %v", err)
		}
	}
}

// The same on SQLite (no server needed): another connection holds the
// write lock; a Deduct through the Shop with Record.LockWait 1s must answer
// within the record's answer bound.
func TestZZShopOnSQLiteHonoursLockWait(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{mr.Addr()}}))
	t.Cleanup(func() { rdb.Close() })
	db := testdb.SQLite(t, 4).DB
	shop, err := stockguard.New(rdb, db, stockguard.Config{Record: sqlstock.Config{LockWait: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shop.Close)
	ctx := t.Context()
	if err := shop.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10}); err != nil {
		t.Fatal(err)
	}
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
	if bound := shop.Record().AnswerBound() + 500*time.Millisecond; took > bound {
		t.Errorf("a Deduct behind the write lock took %v with LockWait 1s (the record's answer bound and round trips: %v)", took, bound)
	}
}
