// Package testdb opens the databases stockguard's tests run on: SQLite in a
// temporary file always, MariaDB and PostgreSQL when STOCKGUARD_MYSQL_DSN
// and STOCKGUARD_POSTGRES_DSN name them. Need skips a test whose real
// server is not given, naming the variable that enables it, so the suites
// on real servers are always registered. It is imported by tests only, so
// the drivers it registers never reach an importer of the library.
package testdb

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql" // registers "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/stockguard/stockguard/stock/sqlstock"
)

// DB is one database the tests run on; Open returns a pool closed when the
// test ends, with at most conns connections, and skips the test (Need)
// when the server it lives on is not given.
type DB struct {
	Name    string
	Dialect sqlstock.Dialect
	// Needs are the real servers the database lives on: none for SQLite.
	// Call Need(t, db.Needs...) in a backend's subtest before the cases
	// that open it, so it skips once.
	Needs []Server
	Open  func(t testing.TB, conns int) *sqlx.DB
}

// All returns SQLite, MariaDB and PostgreSQL, always: the last two open
// the databases STOCKGUARD_MYSQL_DSN and STOCKGUARD_POSTGRES_DSN name, and
// skip the test when the variable is not set.
func All() []DB {
	return []DB{
		{Name: "sqlite", Dialect: sqlstock.SQLite, Open: SQLite},
		{Name: "mariadb", Dialect: sqlstock.MariaDB, Needs: []Server{MySQL}, Open: MariaDB},
		{Name: "postgres", Dialect: sqlstock.Postgres, Needs: []Server{Postgres}, Open: PostgreSQL},
	}
}

// MariaDB opens the database STOCKGUARD_MYSQL_DSN names (with
// interpolateParams=true), or skips t when it is not set.
func MariaDB(t testing.TB, conns int) *sqlx.DB {
	t.Helper()
	return Open(t, "mysql", DSN(t, MySQL), conns)
}

// DSN returns the DSN the tests open s with, or skips t when s is not
// given. For MySQL it adds interpolateParams=true whatever the variable
// says: without it the driver prepares every statement with arguments,
// and a test that wraps the driver's connections to inject a fault on a
// statement (an ExecContext) would never see that statement.
func DSN(t testing.TB, s Server) string {
	t.Helper()
	dsn := Need(t, s)
	if s.Env == MySQLEnv {
		dsn = WithParam(dsn, "interpolateParams=true")
	}
	return dsn
}

// PostgreSQL opens the database STOCKGUARD_POSTGRES_DSN names, or skips t
// when it is not set.
func PostgreSQL(t testing.TB, conns int) *sqlx.DB {
	t.Helper()
	return Open(t, "pgx", Need(t, Postgres), conns)
}

// SQLite opens a fresh file database in WAL mode. It allows at most
// min(conns, 4) connections: SQLite has one writer.
func SQLite(t testing.TB, conns int) *sqlx.DB {
	path := filepath.Join(t.TempDir(), "stock.db")
	db := Open(t, "sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)", conns)
	db.SetMaxOpenConns(min(conns, 4))
	return db
}

// Open opens driver's dsn with at most conns connections, closed when the
// test ends.
func Open(t testing.TB, driver, dsn string, conns int) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open(driver, dsn)
	if err != nil {
		t.Fatalf("open %s: %v", driver, err)
	}
	db.SetMaxOpenConns(conns)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// WithParam adds a query parameter to a DSN that may already have some.
func WithParam(dsn, param string) string {
	switch {
	case strings.Contains(dsn, param):
		return dsn
	case strings.Contains(dsn, "?"):
		return dsn + "&" + param
	}
	return dsn + "?" + param
}

// Unique returns prefix + "_" + 12 random hex digits: a table name or key
// prefix no other test uses.
func Unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}
