package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"

	"github.com/stockguard/stockguard/stock/sqlstock"
)

// probeSKU is a SKU no shop has, read to check that the ledger and the
// operations table are there.
const probeSKU = "stockctl.probe"

// checkTables reads each of the record's tables once. A table that cannot
// be read from a database that answers is a wrong name, a database
// 'stockctl init' has not made, or tables of an earlier version: a usage
// error that names it, and wraps the database's error (report tells
// which of these it says).
func checkTables(ctx context.Context, db *sql.DB, record *sqlstock.Store, name string) error {
	tables := record.Tables() // stock, ledger, operations, returns
	steps := []func() error{
		func() error { _, err := record.SKUs(ctx, "", 1); return err },
		func() error {
			v, err := record.View(ctx)
			if err != nil {
				return err
			}
			defer v.Close()
			_, err = v.HeldLines(ctx, []string{probeSKU})
			return err
		},
		func() error {
			v, err := record.View(ctx)
			if err != nil {
				return err
			}
			defer v.Close()
			_, err = v.Restocks(ctx, []string{probeSKU}, 0)
			return err
		},
	}
	for i, step := range steps {
		err := step()
		if err == nil {
			continue
		}
		if ctx.Err() != nil || db.PingContext(ctx) != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		flag := "--table or --columns"
		if i > 0 {
			flag = "--ledger"
		}
		return usagef("%s: table %s cannot be read (check %s against the shop's sqlstock.Config): %w",
			name, tables[min(i, len(tables)-1)], flag, err)
	}
	return nil
}

// absence is what a database error says is not there.
type absence int

const (
	present       absence = iota // the error is about something else
	missingTable                 // no such table
	missingColumn                // no such column
)

// absent reads the driver's error: MySQL and MariaDB by error number,
// PostgreSQL by SQLSTATE, SQLite by its message (its code, SQLITE_ERROR,
// is every error of a statement).
func absent(err error) absence {
	var my *mysql.MySQLError
	var pg *pgconn.PgError
	var lite *sqlite.Error
	switch {
	case errors.As(err, &my):
		switch my.Number {
		case 1146: // ER_NO_SUCH_TABLE
			return missingTable
		case 1054: // ER_BAD_FIELD_ERROR
			return missingColumn
		}
	case errors.As(err, &pg):
		switch pg.Code {
		case "42P01": // undefined_table
			return missingTable
		case "42703": // undefined_column
			return missingColumn
		}
	case errors.As(err, &lite):
		switch msg := lite.Error(); {
		case strings.Contains(msg, "no such table"):
			return missingTable
		case strings.Contains(msg, "no such column"):
			return missingColumn
		}
	}
	return present
}

// hintAbsent tells what to do about a table or column the database does
// not have, if err says so.
func hintAbsent(w io.Writer, err error) {
	switch absent(err) {
	case missingTable:
		fmt.Fprintln(w, "the table does not exist: 'stockctl init' creates the shop's tables on this database "+
			"('stockctl schema' prints their statements), unless --table or --ledger is wrong")
	case missingColumn:
		fmt.Fprintln(w, "a column is missing: tables of an earlier stockguard lack this version's columns, which "+
			"'stockctl init' adds ('stockctl schema --upgrade' prints the statements), unless --columns is wrong")
	}
}
