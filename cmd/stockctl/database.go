package main

import (
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql" // registers "mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/stockguard/stockguard/stock/sqlstock"
)

// database is one kind of database stockctl opens.
type database struct {
	name    string // in messages
	driver  string // the database/sql driver
	dialect sqlstock.Dialect
}

// databases are the --db values. mysql is told apart from MariaDB once
// connected (connect).
var databases = map[string]database{
	"mysql":      {"MySQL", "mysql", sqlstock.MySQL},
	"mariadb":    {"MariaDB", "mysql", sqlstock.MariaDB},
	"postgres":   {"PostgreSQL", "pgx", sqlstock.Postgres},
	"postgresql": {"PostgreSQL", "pgx", sqlstock.Postgres},
	"pgx":        {"PostgreSQL", "pgx", sqlstock.Postgres},
	"sqlite":     {"SQLite", "sqlite", sqlstock.SQLite},
	"sqlite3":    {"SQLite", "sqlite", sqlstock.SQLite},
}

// target is the database a command opens: its kind, and the DSN to open
// it with, or for PostgreSQL the configuration parsed from the DSN and
// libpq's PG* variables.
type target struct {
	database
	dsn string
	pg  *pgx.ConnConfig
}

// open returns the database, without connecting.
func (t target) open() (*sql.DB, error) {
	if t.pg != nil {
		return stdlib.OpenDB(*t.pg), nil
	}
	return sql.Open(t.driver, t.dsn)
}

// databaseOf checks --db and --dsn without connecting and returns the
// database to open: a DSN its driver cannot parse, or a SQLite file that
// is not there, is a usage error (a SQLite driver would create an empty
// one), unless create is set (init makes the shop's database). A
// PostgreSQL DSN may be empty or partial: what it leaves out comes from
// libpq's variables (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE,
// PGSSLMODE, ...), as psql takes it.
func databaseOf(kind, dsn string, create bool) (target, error) {
	dsn = strings.TrimSpace(dsn)
	kind = strings.ToLower(strings.TrimSpace(kind))
	if dsn == "" && kind == "" {
		return target{}, usagef("no database: give --dsn or set STOCKCTL_DSN (--db postgres alone takes libpq's PG* variables)")
	}
	if kind == "" {
		if kind = guessKind(dsn); kind == "" {
			return target{}, usagef("cannot tell the database from the DSN: give --db mysql, mariadb, postgres or sqlite")
		}
	}
	db, ok := databases[kind]
	if !ok {
		return target{}, usagef("--db %q: want mysql, mariadb, postgres or sqlite", kind)
	}
	t := target{database: db}
	if dsn == "" && db.driver != "pgx" {
		return t, usagef("no %s database: give --dsn or set STOCKCTL_DSN", db.name)
	}
	switch db.driver {
	case "mysql":
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return t, usagef("--dsn is not a %s DSN ('user:pass@tcp(host:3306)/shop'): %v", db.name, err)
		}
		if cfg.DBName == "" {
			return t, usagef("--dsn names no database: end it with /DBNAME ('user@tcp(host:3306)/shop')")
		}
		cfg.InterpolateParams = true // sqlstock's advice: a round trip less per statement
		if cfg.Timeout == 0 {
			cfg.Timeout = 5 * time.Second
		}
		t.dsn = cfg.FormatDSN()
		return t, nil
	case "pgx":
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return t, usagef("--dsn is not a PostgreSQL DSN ('postgres://user@host:5432/shop'), or a PG* variable is wrong: %v", err)
		}
		t.pg = cfg
		return t, nil
	}
	path := sqlitePath(dsn)
	if path == "" || path == ":memory:" || strings.Contains(dsn, "mode=memory") {
		return t, usagef("--dsn: an in-memory SQLite database holds no shop's stock: name the shop's file")
	}
	switch fi, err := os.Stat(path); {
	case errors.Is(err, fs.ErrNotExist) && create:
		if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
			return t, usagef("--dsn: no directory %s to create the SQLite database %s in", filepath.Dir(path), path)
		}
	case errors.Is(err, fs.ErrNotExist):
		return t, usagef("--dsn: no SQLite database at %s ('stockctl init' creates one)", path)
	case err != nil:
		return t, usagef("--dsn: %v", err)
	case fi.IsDir():
		return t, usagef("--dsn: %s is a directory, not a SQLite database", path)
	}
	t.dsn = dsn
	return t, nil
}

// guessKind tells the database from the shape of its DSN, or returns "".
func guessKind(dsn string) string {
	lower := strings.ToLower(dsn)
	switch {
	case strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") || strings.HasPrefix(dsn, "tcp("):
		return "mysql"
	case strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://"),
		strings.Contains(dsn, "host=") || strings.Contains(dsn, "dbname="):
		return "postgres"
	case strings.HasPrefix(lower, "file:"):
		return "sqlite"
	}
	for _, ext := range []string{".db", ".sqlite", ".sqlite3"} {
		if strings.HasSuffix(strings.ToLower(sqlitePath(dsn)), ext) {
			return "sqlite"
		}
	}
	return ""
}

// sqlitePath is the file a SQLite DSN names: "file:PATH?params", "PATH".
func sqlitePath(dsn string) string {
	p, ok := strings.CutPrefix(dsn, "file://")
	if !ok {
		p = strings.TrimPrefix(dsn, "file:")
	}
	p, _, _ = strings.Cut(p, "?")
	return p
}
