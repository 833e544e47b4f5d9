package sqlstock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A Deduct that gave up on a row lock lets go of the rows it locked on the
// server within its LockWait, not the server's own lock wait (50s by
// default on MariaDB): every write statement it sends, the ledger INSERT
// included, carries the bound. Here a Pessimistic Deduct locks a's stock
// row, then its ledger INSERT waits for the row of an order ID that a
// caller's open transaction (Store.InTx) holds; once it has given up, a
// Deduct of another order of a gets its units.
func TestDeductThatGaveUpLetsGoOfItsRowsOnMariaDB(t *testing.T) {
	testdb.Need(t, testdb.MySQL)
	db := testdb.MariaDB(t, 8)
	ctx := context.Background()
	const lockWait = time.Second
	s := newStore(t, db, sqlstock.Config{Dialect: sqlstock.MariaDB, Strategy: sqlstock.Pessimistic, LockWait: lockWait})
	for _, sku := range []string{"a", "b"} {
		if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10, HoldTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	// The caller's transaction holds order x (of SKU b) uncommitted.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := s.InTx(tx).Deduct(ctx, stock.Order{ID: "x", UserID: "u", Items: []stock.Item{{SKU: "b", Qty: 1}}}); err != nil {
		t.Fatalf("InTx Deduct: %v", err)
	}
	// Another node retries x with other items: it locks a, then waits
	// for x's ledger row. It must give up within its bound.
	start := time.Now()
	err = s.Deduct(ctx, stock.Order{ID: "x", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 1}}})
	t.Logf("Deduct of x while the caller's transaction holds it: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if err == nil {
		t.Fatal("Deduct of x succeeded while the caller's transaction held x")
	}
	// Nothing live holds a's row now: a Deduct of another order of a must
	// get its units.
	start = time.Now()
	err = s.Deduct(ctx, stock.Order{ID: "y", UserID: "v", Items: []stock.Item{{SKU: "a", Qty: 1}}})
	if err != nil {
		t.Fatalf("Deduct of y (SKU a, which no live transaction holds) = %v after %v; want nil: "+
			"the Deduct of x that gave up still holds a's row on the server (its ledger INSERT waits longer than LockWait %v); contention=%v",
			err, time.Since(start).Round(time.Millisecond), lockWait, errors.Is(err, stock.ErrContention))
	}
	t.Logf("Deduct of y: nil after %v", time.Since(start).Round(time.Millisecond))
}
