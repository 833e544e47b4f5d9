package sqlstock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
	sqlite3 "github.com/mattn/go-sqlite3"
	"modernc.org/sqlite"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// source returns the driver name and DSN of b's database: a fresh SQLite
// file, or the server its variable names (skipping t when it is not set).
func source(t testing.TB, b backend) (driverName, dsn string) {
	t.Helper()
	switch b.dialect {
	case sqlstock.MariaDB, sqlstock.MySQL:
		return "mysql", testdb.WithParam(testdb.Need(t, testdb.MySQL), "interpolateParams=true")
	case sqlstock.Postgres:
		return "pgx", testdb.Need(t, testdb.Postgres)
	}
	path := filepath.Join(t.TempDir(), "stock.db")
	if b.name == "sqlite-mattn" {
		return "sqlite3", "file:" + path + "?_journal_mode=WAL&_busy_timeout=10000"
	}
	return "sqlite", "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)"
}

// openSQL opens b's database with database/sql alone, as an application
// that uses no sqlx does, closed when the test ends.
func openSQL(t testing.TB, b backend) *sql.DB {
	t.Helper()
	driverName, dsn := source(t, b)
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(4)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// New takes a *sql.DB and, with Config.Dialect zero, speaks the dialect of
// its driver (on MySQL and MariaDB, the one the server says it is).
func TestNewOnSQLDBSpeaksItsDriversDialect(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := openSQL(t, b)
			s := newStoreOn(t, db, sqlstock.Config{})
			ctx := t.Context()
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 3, PerUserLimit: 2}); err != nil {
				t.Fatal(err)
			}
			if err := s.Deduct(ctx, stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 2}}}); err != nil {
				t.Fatal(err)
			}
			lv, err := s.Levels(ctx, "a")
			if err != nil || lv.Available != 1 || lv.Held != 2 {
				t.Fatalf("Levels = %+v, %v; want 1 available, 2 held", lv, err)
			}
			if d := s.Dialect(); d != b.dialect {
				t.Errorf("Dialect() = %v, want %v", d, b.dialect)
			}
		})
	}
}

// The Store's calls run in the caller's *sql.Tx: committed, they apply;
// rolled back, nothing of them does.
func TestInTxOnSQLTx(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := openSQL(t, b)
			s := newStoreOn(t, db, sqlstock.Config{})
			ctx := t.Context()
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 5}); err != nil {
				t.Fatal(err)
			}
			for _, commit := range []bool{false, true} {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var in *sql.Tx = tx
				err = s.InTx(in).Deduct(ctx, stock.Order{ID: "o", Items: []stock.Item{{SKU: "a", Qty: 2}}})
				if err != nil {
					_ = tx.Rollback()
					t.Fatalf("Deduct in a *sql.Tx: %v", err)
				}
				if commit {
					err = tx.Commit()
				} else {
					err = tx.Rollback()
				}
				if err != nil {
					t.Fatal(err)
				}
				want := int64(5)
				if commit {
					want = 3
				}
				if lv, err := s.Levels(ctx, "a"); err != nil || lv.Available != want {
					t.Fatalf("committed %v: Levels = %+v, %v; want %d available", commit, lv, err, want)
				}
			}
			if err := s.Revert(ctx, "o"); err != nil {
				t.Fatalf("Revert of the committed order: %v", err)
			}
		})
	}
}

// New reads the dialect from the *sql.DB's driver without reaching the
// database: a pgxpool.Pool through stdlib.OpenDBFromPool is PostgreSQL.
func TestNewReadsTheDriverWithoutIO(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	fromPool := stdlib.OpenDBFromPool(pool)
	defer fromPool.Close()
	for _, tc := range []struct {
		name string
		db   *sql.DB
		want sqlstock.Dialect // 0: the server tells
		conn *tattler
	}{
		{name: "go-sql-driver/mysql", want: 0, conn: &tattler{drv: &mysql.MySQLDriver{}}},
		{name: "pgx stdlib", want: sqlstock.Postgres, conn: &tattler{drv: stdlib.GetDefaultDriver()}},
		{name: "pgxpool", want: sqlstock.Postgres, db: fromPool},
		{name: "modernc.org/sqlite", want: sqlstock.SQLite, conn: &tattler{drv: &sqlite.Driver{}}},
		{name: "mattn/go-sqlite3", want: sqlstock.SQLite, conn: &tattler{drv: &sqlite3.SQLiteDriver{}}},
	} {
		db := tc.db
		if db == nil {
			db = sql.OpenDB(tc.conn)
		}
		s, err := sqlstock.New(db, sqlstock.Config{})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if d := s.Dialect(); d != tc.want {
			t.Errorf("%s: Dialect() = %v, want %v", tc.name, d, tc.want)
		}
		if tc.conn != nil && tc.conn.dials.Load() != 0 {
			t.Errorf("%s: New reached for the database", tc.name)
		}
	}
	if st := pool.Stat(); st.TotalConns() != 0 {
		t.Errorf("pgxpool: New opened %d connections", st.TotalConns())
	}
}

// wrapped is a driver wrapped by another, as a tracing wrapper (otelsql)
// does: its type tells nothing of the database.
type wrapped struct{ driver.Driver }

// wrappedOn is a connector of a wrapped driver on dsn.
type wrappedOn struct {
	w   wrapped
	dsn string
}

func (c wrappedOn) Connect(context.Context) (driver.Conn, error) { return c.w.Open(c.dsn) }
func (c wrappedOn) Driver() driver.Driver                        { return c.w }

// A driver New cannot tell is refused with an error wrapping
// stock.ErrInvalid that says to set Config.Dialect, before anything is
// sent; with Config.Dialect set the Store works on it.
func TestNewRefusesADriverItCannotTell(t *testing.T) {
	for name, drv := range map[string]driver.Driver{"no driver": nil, "a wrapped driver": wrapped{&mysql.MySQLDriver{}}} {
		conn := &tattler{drv: drv}
		s, err := sqlstock.New(sql.OpenDB(conn), sqlstock.Config{})
		var ie *stock.InvalidError
		if s != nil || !errors.Is(err, stock.ErrInvalid) || !errors.As(err, &ie) || ie.Field != "sqlstock.Config.Dialect" {
			t.Errorf("%s: New = %v, %v; want an InvalidError naming Config.Dialect", name, s, err)
		}
		if conn.dials.Load() != 0 {
			t.Errorf("%s: New reached for the database", name)
		}
		s, err = sqlstock.New(sql.OpenDB(conn), sqlstock.Config{Dialect: sqlstock.Postgres})
		if err != nil || s.Dialect() != sqlstock.Postgres {
			t.Errorf("%s with Dialect Postgres: %v, %v", name, s, err)
		}
	}
	if _, err := sqlstock.New(sql.OpenDB(&tattler{drv: wrapped{}}), sqlstock.Config{}); err == nil ||
		!strings.Contains(err.Error(), "sqlstock_test.wrapped") {
		t.Errorf("the refusal does not name the driver's type: %v", err)
	}

	// A wrapped SQLite driver, told its dialect, is a working Store.
	db := sql.OpenDB(wrappedOn{wrapped{&sqlite.Driver{}}, "file:" + filepath.Join(t.TempDir(), "w.db")})
	t.Cleanup(func() { _ = db.Close() }) // after newStoreOn's cleanup
	s := newStoreOn(t, db, sqlstock.Config{Dialect: sqlstock.SQLite})
	if err := s.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 1}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Available(t.Context(), "a"); err != nil || n != 1 {
		t.Fatalf("Available = %d, %v", n, err)
	}
}

// NewSqlx, the constructor before New took a *sql.DB, still reads the
// dialect from the name the driver was opened under.
func TestNewSqlxReadsTheDriverName(t *testing.T) {
	for name, want := range map[string]sqlstock.Dialect{"sqlite": sqlstock.SQLite, "pgx": sqlstock.Postgres, "mysql": 0} {
		s, err := sqlstock.NewSqlx(sqlx.NewDb(sql.OpenDB(&tattler{}), name), sqlstock.Config{})
		if err != nil || s.Dialect() != want {
			t.Errorf("%s: %v, %v; want dialect %v", name, s, err, want)
		}
	}
	if _, err := sqlstock.NewSqlx(sqlx.NewDb(sql.OpenDB(&tattler{}), "oracle"), sqlstock.Config{}); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("unknown driver name without a Dialect: error %v, want stock.ErrInvalid", err)
	}
	if _, err := sqlstock.NewSqlx(nil, sqlstock.Config{}); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("nil db: error %v, want stock.ErrInvalid", err)
	}
	db := testdb.SQLite(t, 4)
	s, err := sqlstock.NewSqlx(db, sqlstock.Config{Table: testdb.Unique("sgs"), Ledger: testdb.Unique("sgl")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 1}); err != nil {
		t.Fatal(err)
	}
}
