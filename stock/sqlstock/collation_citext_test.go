package sqlstock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// PostgreSQL's citext type compares "a" and "A" equal whatever its
// collation: its column's collation is the database's deterministic
// default, so the Store's check (a deterministic collation passes)
// accepts it, and the table sells one row under two SKUs the ledger
// counts apart, as the refused collations would. The test makes a
// database of its own for the extension and drops it.
func TestCitextSKUColumnRefusedPostgres(t *testing.T) {
	admin := testdb.PostgreSQL(t, 2)
	ctx := context.Background()
	name := testdb.Unique("citext")
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`)
	})
	dsn := testdb.Need(t, testdb.Postgres)
	i := strings.LastIndex(dsn, "/")
	j := strings.Index(dsn[i:], "?")
	own := dsn[:i+1] + name
	if j >= 0 {
		own += dsn[i+j:]
	}
	db := testdb.Open(t, "pgx", own, 4)
	if _, err := db.ExecContext(ctx, `CREATE EXTENSION citext`); err != nil {
		t.Fatal(err)
	}
	table := testdb.Unique("cct")
	if _, err := db.ExecContext(ctx, `CREATE TABLE "`+table+`" (sku citext NOT NULL PRIMARY KEY,`+stockColumns); err != nil {
		t.Fatal(err)
	}
	s, err := sqlstock.New(db.DB, sqlstock.Config{Table: table, Ledger: testdb.Unique("ccl"), MaxGroup: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = s.CreateTables(ctx)
	if err == nil {
		err = s.PutOnSale(ctx, stock.Listing{SKU: "A", Units: 10})
	}
	if !errors.Is(err, stock.ErrInvalid) {
		lv, lerr := s.Levels(ctx, "a")
		t.Errorf("CreateTables and PutOnSale(A) on a citext SKU column: %v; want stock.ErrInvalid (Levels(a) with only A on sale then answers %+v, %v)", err, lv, lerr)
	}
}
