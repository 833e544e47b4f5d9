package sqlstock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// More SKU columns that compare bytes are accepted, and the Store's calls
// tell "A" and "a" apart on them; a column whose name is mixed case and
// renamed through Config.Columns is read too.
func TestMoreByteSKUColumnsAccepted(t *testing.T) {
	cases := []struct {
		name string
		db   func(t *testing.T) *sqlx.DB
		def  string
		col  string
	}{
		{"MariaDB/ascii_bin", func(t *testing.T) *sqlx.DB { return testdb.MariaDB(t, 4) }, "sku VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,", ""},
		{"MariaDB/utf8mb4_nopad_bin", func(t *testing.T) *sqlx.DB { return testdb.MariaDB(t, 4) }, "sku VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL PRIMARY KEY,", ""},
		{"MariaDB/MixedCase", func(t *testing.T) *sqlx.DB { return testdb.MariaDB(t, 4) }, "`ItemCode` VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,", "ItemCode"},
		{"PostgreSQL/POSIX", func(t *testing.T) *sqlx.DB { return testdb.PostgreSQL(t, 4) }, `sku VARCHAR(128) COLLATE "POSIX" NOT NULL PRIMARY KEY,`, ""},
		{"PostgreSQL/default", func(t *testing.T) *sqlx.DB { return testdb.PostgreSQL(t, 4) }, `sku TEXT NOT NULL PRIMARY KEY,`, ""},
		{"PostgreSQL/icu", func(t *testing.T) *sqlx.DB { return testdb.PostgreSQL(t, 4) }, `sku TEXT COLLATE "und-x-icu" NOT NULL PRIMARY KEY,`, ""},
		{"PostgreSQL/MixedCase", func(t *testing.T) *sqlx.DB { return testdb.PostgreSQL(t, 4) }, `"ItemCode" TEXT COLLATE "C" NOT NULL PRIMARY KEY,`, "ItemCode"},
		{"SQLite/MixedCase", func(t *testing.T) *sqlx.DB { return testdb.SQLite(t, 4) }, `"ItemCode" TEXT NOT NULL PRIMARY KEY,`, "ItemCode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := tc.db(t)
			ctx := context.Background()
			table := testdb.Unique("accTab")
			q := `"` + table + `"`
			if tc.name[:7] == "MariaDB" {
				q = "`" + table + "`"
			}
			if _, err := db.ExecContext(ctx, "CREATE TABLE "+q+" ("+tc.def+stockColumns); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+q) })
			cfg := sqlstock.Config{Table: table, MaxGroup: 1}
			if tc.col != "" {
				cfg.Columns.SKU = tc.col
			}
			s := newStoreOn(t, db.DB, cfg)
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "A", Units: 10, PerUserLimit: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Levels(ctx, "a"); !errors.Is(err, stock.ErrUnknownSKU) {
				t.Errorf("Levels(a) with only A on sale: %v; want stock.ErrUnknownSKU", err)
			}
		})
	}
}
