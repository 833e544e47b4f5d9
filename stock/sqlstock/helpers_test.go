package sqlstock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// backend is one database the tests run on.
type backend struct {
	name    string
	dialect sqlstock.Dialect
	open    func(t testing.TB) *sqlx.DB
}

// backends returns SQLite always, and MariaDB and PostgreSQL when
// STOCKGUARD_MYSQL_DSN and STOCKGUARD_POSTGRES_DSN are set.
func backends() []backend {
	bs := []backend{{name: "sqlite", dialect: sqlstock.SQLite, open: openSQLite}}
	if dsn := os.Getenv("STOCKGUARD_MYSQL_DSN"); dsn != "" {
		bs = append(bs, backend{name: "mariadb", dialect: sqlstock.MariaDB, open: func(t testing.TB) *sqlx.DB {
			return openDB(t, "mysql", dsn)
		}})
	}
	if dsn := os.Getenv("STOCKGUARD_POSTGRES_DSN"); dsn != "" {
		bs = append(bs, backend{name: "postgres", dialect: sqlstock.Postgres, open: func(t testing.TB) *sqlx.DB {
			return openDB(t, "pgx", dsn)
		}})
	}
	return bs
}

// openSQLite opens a fresh file database in WAL mode with a pool of 4.
func openSQLite(t testing.TB) *sqlx.DB {
	path := filepath.Join(t.TempDir(), "stock.db")
	db := openDB(t, "sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)")
	db.SetMaxOpenConns(4)
	return db
}

func openDB(t testing.TB, driver, dsn string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open(driver, dsn)
	if err != nil {
		t.Fatalf("open %s: %v", driver, err)
	}
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// uniqueName returns a table name no other test uses.
func uniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// newStore builds a Store over fresh tables of its own, dropped when the
// test ends.
func newStore(t testing.TB, db *sqlx.DB, cfg sqlstock.Config) *sqlstock.Store {
	t.Helper()
	if cfg.Table == "" {
		cfg.Table = uniqueName("sgs")
	}
	if cfg.Ledger == "" {
		cfg.Ledger = uniqueName("sgl")
	}
	s, err := sqlstock.New(db, cfg)
	if err != nil {
		t.Fatalf("sqlstock.New: %v", err)
	}
	ctx := context.Background()
	if err := s.CreateTables(ctx); err != nil {
		t.Fatalf("CreateTables: %v", err)
	}
	t.Cleanup(func() {
		for _, table := range []string{cfg.Ledger, cfg.Table} {
			if _, err := db.ExecContext(ctx, "DROP TABLE "+quote(s.Dialect(), table)); err != nil {
				t.Errorf("drop %s: %v", table, err)
			}
		}
	})
	return s
}

func quote(d sqlstock.Dialect, name string) string {
	if d == sqlstock.MySQL || d == sqlstock.MariaDB {
		return "`" + name + "`"
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

var strategies = []sqlstock.Strategy{sqlstock.Atomic, sqlstock.Optimistic, sqlstock.Pessimistic}

// forEach runs f for every backend and strategy.
func forEach(t *testing.T, f func(t *testing.T, b backend, st sqlstock.Strategy)) {
	for _, b := range backends() {
		for _, st := range strategies {
			t.Run(b.name+"/"+st.String(), func(t *testing.T) { f(t, b, st) })
		}
	}
}

// managerFor builds a Store of one strategy over b for a conformance subtest.
//
// The suite retries a call that reports stock.ErrContention, as callers
// should, but 500 of its buyers share one hot row, where an optimistic
// Store with the default attempts gives up on most calls and the case
// would crawl: it gets attempts enough to rarely give up there. Giving up
// (stock.ErrContention, never sold out) is tested on its own in
// TestOptimisticGivesUpWithContention.
func managerFor(b backend, st sqlstock.Strategy) func(t *testing.T, clock stock.Clock) stock.Manager {
	return func(t *testing.T, clock stock.Clock) stock.Manager {
		cfg := sqlstock.Config{Strategy: st, Dialect: b.dialect, Clock: clock}
		if st == sqlstock.Optimistic {
			cfg.MaxAttempts = 100_000
		}
		return newStore(t, b.open(t), cfg)
	}
}

func envDSN(name string) string { return os.Getenv(name) }
