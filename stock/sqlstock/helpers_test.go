package sqlstock_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/internal/testdb/mattn"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// backend is one database the tests run on.
type backend struct {
	name    string
	dialect sqlstock.Dialect
	// needs are the real servers the database lives on: none for SQLite.
	needs []testdb.Server
	// open opens the database, or skips the test without its server.
	open func(t testing.TB) *sqlx.DB
}

// backends returns SQLite on both drivers (modernc.org/sqlite and
// mattn/go-sqlite3), MariaDB and PostgreSQL. The last two skip, naming
// STOCKGUARD_MYSQL_DSN or STOCKGUARD_POSTGRES_DSN, when it is not set.
func backends() []backend {
	var bs []backend
	dbs := testdb.All()
	dbs = append(dbs[:1:1], append([]testdb.DB{mattn.DB}, dbs[1:]...)...)
	for _, d := range dbs {
		bs = append(bs, backend{name: d.Name, dialect: d.Dialect, needs: d.Needs, open: func(t testing.TB) *sqlx.DB {
			t.Helper()
			return d.Open(t, 8)
		}})
	}
	return bs
}

// need skips t when b's server is not given: call it in b's subtest before
// the cases under it, so that it skips once.
func (b backend) need(t testing.TB) {
	t.Helper()
	testdb.Need(t, b.needs...)
}

// newStore builds a Store over fresh tables of its own, dropped when the
// test ends.
func newStore(t testing.TB, db *sqlx.DB, cfg sqlstock.Config) *sqlstock.Store {
	t.Helper()
	return newStoreOn(t, db.DB, cfg)
}

// newStoreOn is newStore on a *sql.DB.
func newStoreOn(t testing.TB, db *sql.DB, cfg sqlstock.Config) *sqlstock.Store {
	t.Helper()
	if cfg.Table == "" {
		cfg.Table = testdb.Unique("sgs")
	}
	if cfg.Ledger == "" {
		cfg.Ledger = testdb.Unique("sgl")
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
		tables := s.Tables()
		slices.Reverse(tables)
		for _, table := range tables {
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
			t.Run(b.name+"/"+st.String(), func(t *testing.T) {
				b.need(t)
				f(t, b, st)
			})
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
