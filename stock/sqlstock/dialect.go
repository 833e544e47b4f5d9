package sqlstock

import (
	"database/sql/driver"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// Dialect is a database's SQL flavour: how names are quoted, how
// parameters are written, how a row lock waits and what the tables look
// like. It holds no driver code, so importing this package pulls in no
// database driver; the application imports the one it opens.
type Dialect int

const (
	// MySQL is MySQL 8 (github.com/go-sql-driver/mysql), and any server
	// on that driver whose VERSION() does not say MariaDB. Lock waits are
	// bounded with SET_VAR(innodb_lock_wait_timeout) hints, which MariaDB
	// reads as comments.
	// Add interpolateParams=true to the DSN: it saves a round trip per
	// statement.
	MySQL Dialect = iota + 1
	// MariaDB is MariaDB 10.6 or later (github.com/go-sql-driver/mysql).
	// Lock waits are bounded with SET STATEMENT innodb_lock_wait_timeout
	// and FOR UPDATE WAIT n, which MySQL refuses.
	MariaDB
	// Postgres is PostgreSQL 13 or later (github.com/jackc/pgx/v5/stdlib).
	Postgres
	// SQLite is SQLite 3.35 or later (modernc.org/sqlite or
	// github.com/mattn/go-sqlite3). It has one writer at a time: every
	// write runs in a BEGIN IMMEDIATE transaction on a pinned connection,
	// with busy_timeout set to Config.LockWait. Use a file database in WAL
	// mode (_pragma=journal_mode(WAL) with modernc, _journal_mode=WAL with
	// mattn) for concurrent readers.
	SQLite
)

// String returns the dialect's name.
func (d Dialect) String() string {
	switch d {
	case MySQL:
		return "mysql"
	case MariaDB:
		return "mariadb"
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	}
	return "Dialect(" + itoa(int64(d)) + ")"
}

// dialectOf names the dialect of a driver, or 0 if it is not known. The
// "mysql" driver's is the server's to tell (see detect).
func dialectOf(driverName string) Dialect {
	switch driverName {
	case "pgx", "pgx/v5", "postgres":
		return Postgres
	case "sqlite", "sqlite3":
		return SQLite
	}
	return 0
}

// familyOf returns the dialects a driver registered as driverName can
// speak, or nil if this package does not know the driver (a wrapped one
// may speak any).
func familyOf(driverName string) []Dialect {
	if driverName == mysqlDriver {
		return []Dialect{MySQL, MariaDB}
	}
	if d := dialectOf(driverName); d != 0 {
		return []Dialect{d}
	}
	return nil
}

// dialectList names dialects for an error: "mysql or mariadb".
func dialectList(ds []Dialect) string {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.String()
	}
	return strings.Join(names, " or ")
}

// drivers are the name each driver this package knows registers with
// database/sql, by the driver's type (its package path and name): a
// *sql.DB tells its driver, not the name it was opened under. The types
// are named, not imported, so that this package pulls in no driver.
var drivers = map[string]string{
	"github.com/go-sql-driver/mysql.MySQLDriver": mysqlDriver,
	"github.com/jackc/pgx/v5/stdlib.Driver":      "pgx",
	"github.com/jackc/pgx/v4/stdlib.Driver":      "pgx",
	"github.com/lib/pq.Driver":                   "postgres",
	"modernc.org/sqlite.Driver":                  "sqlite",
	"github.com/mattn/go-sqlite3.SQLiteDriver":   "sqlite3",
}

// driverName returns the name drv registers with database/sql, or "" if
// this package does not know it, and the driver's type for an error.
func driverName(drv driver.Driver) (name, desc string) {
	t := reflect.TypeOf(drv)
	if t == nil {
		return "", "<nil>"
	}
	desc = t.String()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.PkgPath() == "" {
		return "", desc
	}
	return drivers[t.PkgPath()+"."+t.Name()], desc
}

func (d Dialect) mysqlLike() bool { return d == MySQL || d == MariaDB }

// quote quotes a name already checked against identRE.
func (d Dialect) quote(name string) string {
	if d.mysqlLike() {
		return "`" + name + "`"
	}
	return `"` + name + `"`
}

// bindType is how the dialect writes parameters.
func (d Dialect) bindType() int {
	if d == Postgres {
		return sqlx.DOLLAR
	}
	return sqlx.QUESTION
}

// idType is the column type of an order ID, user ID or SKU: up to
// stock.MaxIDLen bytes, compared byte by byte.
func (d Dialect) idType() string {
	switch {
	case d.mysqlLike():
		return "VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
	case d == Postgres:
		return `VARCHAR(128) COLLATE "C"`
	}
	return "TEXT"
}

// lockRow is the clause that ends a SELECT locking its rows, waiting at
// most wait, and the hint that goes after SELECT, if any.
func (d Dialect) lockRow(wait time.Duration) (hint, suffix string) {
	secs := strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10)
	switch d {
	case MySQL:
		return " /*+ SET_VAR(innodb_lock_wait_timeout=" + secs + ") */", " FOR UPDATE"
	case MariaDB:
		return "", " FOR UPDATE WAIT " + secs
	case Postgres:
		return "", " FOR UPDATE"
	}
	return "", "" // SQLite: the IMMEDIATE transaction already excludes writers.
}

// boundWrite makes a write statement (UPDATE or INSERT) wait at most wait
// for a row lock on MySQL and MariaDB, without a round trip of its own: a
// SET STATEMENT prefix on MariaDB, a SET_VAR hint on MySQL. PostgreSQL
// bounds a transaction's waits with SET LOCAL lock_timeout (see inTx);
// SQLite's writers never wait for row locks.
func (d Dialect) boundWrite(stmt string, wait time.Duration) string {
	secs := strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10)
	switch d {
	case MariaDB:
		return "SET STATEMENT innodb_lock_wait_timeout=" + secs + " FOR " + stmt
	case MySQL:
		for _, verb := range []string{"UPDATE ", "INSERT "} {
			if strings.HasPrefix(stmt, verb) {
				return verb + "/*+ SET_VAR(innodb_lock_wait_timeout=" + secs + ") */ " + stmt[len(verb):]
			}
		}
	}
	return stmt
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func lower(s string) string { return strings.ToLower(s) }

func quoteName(s string) string { return strconv.Quote(s) }
