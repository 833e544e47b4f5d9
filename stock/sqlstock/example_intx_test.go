package sqlstock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// The caller writes its order row and takes the stock in one local
// transaction: both commit, or neither. A sold-out refusal leaves the
// transaction usable, so the order row can record it in the same
// transaction.
func ExampleStore_InTx() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sqlstock-intx")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	s, err := sqlstock.New(db, sqlstock.Config{})
	if err != nil {
		panic(err)
	}
	if err := s.CreateTables(ctx); err != nil {
		panic(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)"); err != nil {
		panic(err)
	}
	_ = s.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 2})

	placeOrder := func(id string, qty int64) error {
		tx, err := db.BeginTx(ctx, nil) // BEGIN: a *sql.Tx
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, status) VALUES (?, 'placed')", id); err != nil {
			return err
		}
		err = s.InTx(tx).Deduct(ctx, stock.Order{ID: id, UserID: "alice", Items: []stock.Item{{SKU: "phone", Qty: qty}}})
		switch {
		case errors.Is(err, stock.ErrSoldOut):
			// A refusal took nothing and the transaction goes on.
			if _, err := tx.ExecContext(ctx, "UPDATE orders SET status = 'sold out' WHERE id = ?", id); err != nil {
				return err
			}
		case err != nil:
			return err // sqlstock.ErrTxFailed: roll back (deferred); retry the whole transaction on stock.ErrContention
		}
		return tx.Commit() // COMMIT: the order row and its stock together
	}

	fmt.Println("order-1:", placeOrder("order-1", 1))
	fmt.Println("order-2:", placeOrder("order-2", 5))
	rows, err := db.QueryContext(ctx, "SELECT id, status FROM orders ORDER BY id")
	if err != nil {
		panic(err)
	}
	for rows.Next() {
		var id, status string
		_ = rows.Scan(&id, &status)
		fmt.Println(id, status)
	}
	_ = rows.Close()
	lv, _ := s.Levels(ctx, "phone")
	fmt.Printf("available %d, held %d\n", lv.Available, lv.Held)
	// Output:
	// order-1: <nil>
	// order-2: <nil>
	// order-1 placed
	// order-2 sold out
	// available 1, held 1
}
