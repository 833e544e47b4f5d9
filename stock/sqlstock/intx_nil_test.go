package sqlstock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// InTx of a nil handle, typed or not (`var tx *sql.Tx` passed before
// Begin succeeded), is refused: every TxStore call fails with an error
// wrapping stock.ErrInvalid, and none panics.
func TestInTxOfANilTxIsRefused(t *testing.T) {
	db := testdb.SQLite(t, 4)
	ctx := context.Background()
	s := newStore(t, db, sqlstock.Config{Dialect: sqlstock.SQLite})
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
		t.Fatal(err)
	}
	for _, tx := range []sqlstock.DBTX{(*sql.Tx)(nil), (*sql.Conn)(nil), (*sql.DB)(nil), (*sqlx.Tx)(nil), (*sqlx.DB)(nil)} {
		t.Run(fmt.Sprintf("%T", tx), func(t *testing.T) {
			ts := s.InTx(tx)
			calls := map[string]func() error{
				"Deduct": func() error {
					return ts.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
				},
				"Confirm": func() error { return ts.Confirm(ctx, "o1") },
				"Revert":  func() error { return ts.Revert(ctx, "o1") },
			}
			for name, call := range calls {
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("TxStore.%s on a nil %T panicked: %v; want an error wrapping stock.ErrInvalid", name, tx, r)
						}
					}()
					err = call()
				}()
				if !errors.Is(err, stock.ErrInvalid) {
					t.Fatalf("TxStore.%s on a nil %T = %v; want an error wrapping stock.ErrInvalid", name, tx, err)
				}
			}
		})
	}
	if lv, err := s.Levels(ctx, "a"); err != nil || lv.Available != 10 {
		t.Fatalf("levels %+v, %v; want nothing taken", lv, err)
	}
}
