package sqlstock_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A pgxpool.Pool serves a Store through pgx's database/sql adapter:
// stdlib.OpenDBFromPool gives a *sql.DB that borrows the pool's
// connections, and New reads its driver as PostgreSQL. (The example needs
// a server: TestExampleNewPgxpool runs it on STOCKGUARD_POSTGRES_DSN.)
func ExampleNew_pgxpool() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("STOCKGUARD_POSTGRES_DSN")) // postgres://user@host:5432/shop
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()

	s, err := sqlstock.New(db, sqlstock.Config{Table: "example_stock", Ledger: "example_ledger"})
	if err != nil {
		panic(err)
	}
	if err := s.CreateTables(ctx); err != nil {
		panic(err)
	}
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10}); err != nil {
		panic(err)
	}
	err = s.Deduct(ctx, stock.Order{ID: "order-1", Items: []stock.Item{{SKU: "phone", Qty: 1}}})
	fmt.Println("deduct:", err, "on", s.Dialect())
}

// The pgxpool example, run on a real PostgreSQL server.
func TestExampleNewPgxpool(t *testing.T) {
	dsn := testdb.Need(t, testdb.Postgres)
	db := openSQL(t, backend{name: "postgres", dialect: sqlstock.Postgres})
	drop := func() {
		for _, table := range []string{"example_ledger_returns", "example_ledger_ops", "example_ledger", "example_stock"} {
			if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table); err != nil {
				t.Errorf("drop %s: %v", table, err)
			}
		}
	}
	drop()
	t.Cleanup(drop)
	t.Setenv("STOCKGUARD_POSTGRES_DSN", dsn)
	ExampleNew_pgxpool()
}
