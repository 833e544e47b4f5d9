package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite"

	"github.com/stockguard/stockguard/stock/sqlstock"
)

// openRecord opens the database record: SQLite in a temporary directory, or
// the MySQL/MariaDB or PostgreSQL server cfg names, with tables unique to
// this run (dropped when the run ends).
func openRecord(ctx context.Context, cfg config, s *system) (*sqlstock.Store, string, error) {
	var (
		db   *sqlx.DB
		err  error
		name string
		sc   = sqlstock.Config{Table: s.prefix + "_stock", Ledger: s.prefix + "_ledger", Observer: s.obs, MaxGroup: cfg.maxGroup}
	)
	switch {
	case cfg.mysqlDSN != "":
		db, err = sqlx.Open("mysql", cfg.mysqlDSN)
		name = "MySQL"
	case cfg.postgresDSN != "":
		db, err = sqlx.Open("pgx", cfg.postgresDSN)
		name = "PostgreSQL"
	default:
		dir, derr := os.MkdirTemp("", "flashsale-")
		if derr != nil {
			return nil, "", derr
		}
		s.cleanup = append(s.cleanup, func() { _ = os.RemoveAll(dir) })
		path := filepath.Join(dir, "sale.db")
		db, err = sqlx.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)")
		name = "SQLite"
		sc.LockWait = 10 * time.Second
	}
	if err != nil {
		return nil, "", err
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
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	if name == "MySQL" {
		var v string
		if db.GetContext(pctx, &v, "SELECT VERSION()") == nil && strings.Contains(v, "MariaDB") {
			sc.Dialect, name = sqlstock.MariaDB, "MariaDB"
		}
	}
	st, err := sqlstock.New(db, sc)
	if err != nil {
		return nil, "", err
	}
	if err := st.CreateTables(ctx); err != nil {
		return nil, "", err
	}
	if name != "SQLite" {
		s.cleanup = append(s.cleanup, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, t := range st.Tables() {
				_, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t)
			}
		})
	}
	s.recordDB, s.recordTables = db, sc
	return st, name, nil
}
