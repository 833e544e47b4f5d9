package sqlstock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// New refuses a stock table named like one of the ledger's indexes
// (Ledger + "_due", "_sku_user" or "_ops_sku", which share the tables'
// names on PostgreSQL and SQLite) with an error wrapping stock.ErrInvalid,
// whatever the case: such a Table would fail CreateTables on SQLite and,
// on PostgreSQL, take the name of the reclaimer's index, which CREATE
// INDEX IF NOT EXISTS would then skip.
func TestTableNamedLikeALedgerIndexIsRefusedByNew(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			ledger := testdb.Unique("sgl")
			for _, table := range []string{ledger + "_due", ledger + "_sku_user", ledger + "_ops_sku", ledger + "_DUE"} {
				cfg := sqlstock.Config{Dialect: b.dialect, Ledger: ledger, Table: table}
				if _, err := sqlstock.New(db.DB, cfg); !errors.Is(err, stock.ErrInvalid) {
					t.Errorf("New with Table %q and Ledger %q = %v; want an error wrapping stock.ErrInvalid", table, ledger, err)
				}
				if _, err := sqlstock.Schema(b.dialect, cfg); !errors.Is(err, stock.ErrInvalid) {
					t.Errorf("Schema with Table %q and Ledger %q = %v; want an error wrapping stock.ErrInvalid", table, ledger, err)
				}
			}
			// A name beside them is a table like any other.
			cfg := sqlstock.Config{Dialect: b.dialect, Ledger: ledger, Table: ledger + "_dues"}
			s := newStore(t, db, cfg)
			if err := s.PutOnSale(context.Background(), stock.Listing{SKU: "a", Units: 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
