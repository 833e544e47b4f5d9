package main

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql" // registers "mysql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"

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

// databaseOf checks --db and --dsn without connecting and returns the DSN
// to open: a DSN its driver cannot parse, or a SQLite file that is not
// there, is a usage error (a SQLite driver would create an empty one).
func databaseOf(kind, dsn string) (database, string, error) {
	dsn = strings.TrimSpace(dsn)
	if dsn == "" {
		return database{}, "", usagef("no database: give --dsn or set STOCKCTL_DSN")
	}
	kind = strings.ToLower(strings.TrimSpace(kind))
	if kind == "" {
		if kind = guessKind(dsn); kind == "" {
			return database{}, "", usagef("cannot tell the database from the DSN: give --db mysql, mariadb, postgres or sqlite")
		}
	}
	db, ok := databases[kind]
	if !ok {
		return database{}, "", usagef("--db %q: want mysql, mariadb, postgres or sqlite", kind)
	}
	switch db.driver {
	case "mysql":
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return db, "", usagef("--dsn is not a %s DSN ('user:pass@tcp(host:3306)/shop'): %v", db.name, err)
		}
		if cfg.DBName == "" {
			return db, "", usagef("--dsn names no database: end it with /DBNAME ('user@tcp(host:3306)/shop')")
		}
		cfg.InterpolateParams = true // sqlstock's advice: a round trip less per statement
		if cfg.Timeout == 0 {
			cfg.Timeout = 5 * time.Second
		}
		return db, cfg.FormatDSN(), nil
	case "pgx":
		if _, err := pgx.ParseConfig(dsn); err != nil {
			return db, "", usagef("--dsn is not a PostgreSQL DSN ('postgres://user@host:5432/shop'): %v", err)
		}
		return db, dsn, nil
	}
	path := sqlitePath(dsn)
	if path == "" || path == ":memory:" || strings.Contains(dsn, "mode=memory") {
		return db, "", usagef("--dsn: an in-memory SQLite database holds no shop's stock: name the shop's file")
	}
	switch fi, err := os.Stat(path); {
	case errors.Is(err, fs.ErrNotExist):
		return db, "", usagef("--dsn: no SQLite database at %s", path)
	case err != nil:
		return db, "", usagef("--dsn: %v", err)
	case fi.IsDir():
		return db, "", usagef("--dsn: %s is a directory, not a SQLite database", path)
	}
	return db, dsn, nil
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
