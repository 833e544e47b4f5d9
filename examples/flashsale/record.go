package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite"

	"github.com/stockguard/stockguard/stock/sqlstock"
)

// openDB opens the database of the record: SQLite in a temporary
// directory, or the MySQL/MariaDB or PostgreSQL server cfg names. The
// record's tables are unique to this run (dropped when it ends on a
// server).
func openDB(ctx context.Context, cfg config, s *system) (*sqlx.DB, sqlstock.Config, string, error) {
	var (
		db   *sqlx.DB
		err  error
		name string
		sc   = sqlstock.Config{Table: s.prefix + "_stock", Ledger: s.prefix + "_ledger", MaxGroup: cfg.maxGroup}
	)
	switch {
	case cfg.mysqlDSN != "":
		db, err = sqlx.Open("mysql", cfg.mysqlDSN)
		name = "MySQL/MariaDB"
	case cfg.postgresDSN != "":
		db, err = sqlx.Open("pgx", cfg.postgresDSN)
		name = "PostgreSQL"
	default:
		dir, derr := os.MkdirTemp("", "flashsale-")
		if derr != nil {
			return nil, sc, "", derr
		}
		s.cleanup = append(s.cleanup, func() { _ = os.RemoveAll(dir) })
		path := filepath.Join(dir, "sale.db")
		db, err = sqlx.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)")
		name = "SQLite"
		sc.LockWait = 10 * time.Second
	}
	if err != nil {
		return nil, sc, "", err
	}
	s.cleanup = append(s.cleanup, func() { _ = db.Close() })
	if name == "SQLite" {
		db.SetMaxOpenConns(4)
	} else {
		db.SetMaxOpenConns(32)
		db.SetMaxIdleConns(32)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		return nil, sc, "", fmt.Errorf("%s: %w", name, err)
	}
	return db, sc, name, nil
}
