// Package mattn opens the tests' SQLite databases through
// github.com/mattn/go-sqlite3 (cgo), the second SQLite driver sqlstock
// names, so that the suites that import it run on both drivers. It is
// imported by tests only, and kept apart from package testdb so that only
// the tests that want cgo build it.
package mattn

import (
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"
	_ "github.com/mattn/go-sqlite3" // registers "sqlite3"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// DB is a fresh SQLite file database opened with mattn/go-sqlite3, named
// "sqlite-mattn".
var DB = testdb.DB{Name: "sqlite-mattn", Dialect: sqlstock.SQLite, Open: SQLite}

// SQLite opens a fresh file database in WAL mode with mattn/go-sqlite3.
// It allows at most min(conns, 4) connections: SQLite has one writer.
func SQLite(t testing.TB, conns int) *sqlx.DB {
	path := filepath.Join(t.TempDir(), "stock.db")
	db := testdb.Open(t, "sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=10000", conns)
	db.SetMaxOpenConns(min(conns, 4))
	return db
}
