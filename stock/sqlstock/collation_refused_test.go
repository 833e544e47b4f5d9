package sqlstock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// stockColumns are the columns of an application's own stock table
// after its SKU column.
const stockColumns = " available BIGINT NOT NULL, held BIGINT NOT NULL DEFAULT 0, sold BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0," +
	" per_user_limit BIGINT NOT NULL DEFAULT 0, hold_ttl_ms BIGINT NOT NULL DEFAULT 600000, max_hold_ttl_ms BIGINT NOT NULL DEFAULT 0)"

// wantRefusedCollation checks that every call of a Store over an
// application's own stock table, whose SKU column's collation matches
// SKUs that differ in case, is refused with stock.ErrInvalid naming the
// table, the column and the collation, and writes nothing: the ledger
// counts "a" and "A" apart, so such a column would let one user take
// past the per-user limit, and calls would disagree on whether "a"
// exists when only "A" is on sale.
func wantRefusedCollation(t *testing.T, db *sqlx.DB, table, collation string, rows int) {
	t.Helper()
	ctx := context.Background()
	ledger := testdb.Unique("ccl")
	refused := func(call string, err error) {
		t.Helper()
		if !errors.Is(err, stock.ErrInvalid) || errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome) {
			t.Errorf("%s: %v; want stock.ErrInvalid only", call, err)
			return
		}
		for _, want := range []string{table, `"sku"`, collation, "compares bytes"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not name %q", call, err, want)
			}
		}
	}
	for _, st := range strategies {
		s, err := sqlstock.New(db.DB, sqlstock.Config{Table: table, Ledger: ledger, Strategy: st, MaxGroup: 1})
		if err != nil {
			t.Fatal(err)
		}
		refused(st.String()+" CreateTables", s.CreateTables(ctx))
		refused(st.String()+" PutOnSale", s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 1}))
		_, err = s.Levels(ctx, "a")
		refused(st.String()+" Levels", err)
		_, err = s.Snapshot(ctx, []string{"a"})
		refused(st.String()+" Snapshot", err)
		refused(st.String()+" Deduct", s.Deduct(ctx, stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "A", Qty: 1}, {SKU: "a", Qty: 1}}}))
		refused(st.String()+" Confirm", s.Confirm(ctx, "o1"))
		refused(st.String()+" Revert", s.Revert(ctx, "o1"))
		refused(st.String()+" Restock", s.Restock(ctx, stock.Restock{OpID: "r1", SKU: "a", Units: 1}))
		_, err = s.ReclaimExpired(ctx, 10)
		refused(st.String()+" ReclaimExpired", err)
		_, err = s.Orders(ctx, []string{"o1"})
		refused(st.String()+" Orders", err)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		refused(st.String()+" InTx Deduct", s.InTx(tx).Deduct(ctx, stock.Order{ID: "o2", Items: []stock.Item{{SKU: "a", Qty: 1}}}))
		_ = tx.Rollback()
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil || n != rows {
		t.Errorf("stock table holds %d rows (%v), want the %d it had: nothing written", n, err, rows)
	}
	if _, err := db.ExecContext(ctx, "SELECT 1 FROM "+ledger); err == nil {
		t.Errorf("ledger %s was created", ledger)
	}
}

// MariaDB's utf8mb4_general_ci (its default) compares "a" and "A" equal.
func TestCaseInsensitiveSKUColumnRefusedMariaDB(t *testing.T) {
	db := testdb.MariaDB(t, 4)
	ctx := context.Background()
	table := testdb.Unique("cci")
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+table+"`") })
	if _, err := db.ExecContext(ctx, "CREATE TABLE `"+table+"` (sku VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY,"+stockColumns); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO `"+table+"` (sku, available) VALUES ('A', 10)"); err != nil {
		t.Fatal(err)
	}
	wantRefusedCollation(t, db, table, "utf8mb4_general_ci", 1)
}

// A nondeterministic ICU collation on PostgreSQL compares "a" and "A"
// equal.
func TestCaseInsensitiveSKUColumnRefusedPostgres(t *testing.T) {
	db := testdb.PostgreSQL(t, 4)
	ctx := context.Background()
	schema := testdb.Unique("cci")
	table := testdb.Unique("cci")
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA "`+schema+`"`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.ExecContext(context.Background(), `DROP TABLE IF EXISTS "`+table+`"`)
		_, _ = db.ExecContext(context.Background(), `DROP SCHEMA "`+schema+`" CASCADE`)
	})
	if _, err := db.ExecContext(ctx, `CREATE COLLATION "`+schema+`".ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE "`+table+`" (sku VARCHAR(128) COLLATE "`+schema+`".ci NOT NULL PRIMARY KEY,`+stockColumns); err != nil {
		t.Fatal(err)
	}
	wantRefusedCollation(t, db, table, "ci", 0)
}

// SQLite's COLLATE NOCASE compares "a" and "A" equal.
func TestCaseInsensitiveSKUColumnRefusedSQLite(t *testing.T) {
	db := testdb.SQLite(t, 4)
	table := testdb.Unique("cci")
	if _, err := db.ExecContext(context.Background(), `CREATE TABLE "`+table+`" (sku TEXT COLLATE NOCASE NOT NULL PRIMARY KEY,`+stockColumns); err != nil {
		t.Fatal(err)
	}
	wantRefusedCollation(t, db, table, "NOCASE", 0)
}

// A table made after the Store's first call is read by the call after
// it: a Store whose first call found no stock table refuses the
// case-insensitive one made since.
func TestCaseInsensitiveSKUColumnMadeLaterRefused(t *testing.T) {
	db := testdb.SQLite(t, 4)
	ctx := context.Background()
	table := testdb.Unique("cci")
	s, err := sqlstock.New(db.DB, sqlstock.Config{Table: table, Ledger: testdb.Unique("ccl")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Levels(ctx, "a"); err == nil || errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("Levels without a stock table: %v; want the database's error", err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE "`+table+`" (sku TEXT COLLATE NOCASE NOT NULL PRIMARY KEY,`+stockColumns); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 1}); !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("PutOnSale on the table made since: %v; want stock.ErrInvalid", err)
	}
}

// Binary collations are accepted: MariaDB's utf8mb4_bin, latin1_bin
// (whose rows are locked one statement each: it does not sort in UTF-8's
// byte order) and a binary string; SQLite's BINARY.
func TestBinarySKUColumnsAccepted(t *testing.T) {
	cases := []struct {
		name string
		db   func(t *testing.T) *sqlx.DB
		def  string
	}{
		{"MariaDB/utf8mb4_bin", func(t *testing.T) *sqlx.DB { return testdb.MariaDB(t, 4) }, "sku VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,"},
		{"MariaDB/latin1_bin", func(t *testing.T) *sqlx.DB { return testdb.MariaDB(t, 4) }, "sku VARCHAR(128) CHARACTER SET latin1 COLLATE latin1_bin NOT NULL PRIMARY KEY,"},
		{"MariaDB/varbinary", func(t *testing.T) *sqlx.DB { return testdb.MariaDB(t, 4) }, "sku VARBINARY(128) NOT NULL PRIMARY KEY,"},
		{"PostgreSQL/C", func(t *testing.T) *sqlx.DB { return testdb.PostgreSQL(t, 4) }, `sku VARCHAR(128) COLLATE "C" NOT NULL PRIMARY KEY,`},
		{"SQLite/BINARY", func(t *testing.T) *sqlx.DB { return testdb.SQLite(t, 4) }, "sku TEXT COLLATE BINARY NOT NULL PRIMARY KEY,"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := tc.db(t)
			ctx := context.Background()
			table := testdb.Unique("cbin")
			if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" ("+tc.def+stockColumns); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table) })
			s := newStoreOn(t, db.DB, sqlstock.Config{Table: table, MaxGroup: 1})
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "A", Units: 10, PerUserLimit: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Levels(ctx, "a"); !errors.Is(err, stock.ErrUnknownSKU) {
				t.Errorf("Levels(a) with only A on sale: %v; want stock.ErrUnknownSKU", err)
			}
			if err := s.Deduct(ctx, stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "A", Qty: 1}}}); err != nil {
				t.Fatal(err)
			}
			if err := s.Deduct(ctx, stock.Order{ID: "o2", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); !errors.Is(err, stock.ErrUnknownSKU) {
				t.Errorf("Deduct of a with only A on sale: %v; want stock.ErrUnknownSKU", err)
			}
		})
	}
}
