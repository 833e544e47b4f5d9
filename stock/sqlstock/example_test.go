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

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sqlstock-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=journal_mode(WAL)")
	if err != nil {
		panic(err)
	}
	defer db.Close()

	// The zero Config: atomic strategy, dialect from the driver, tables
	// "stock" and "stockguard_ledger".
	s, err := sqlstock.New(db, sqlstock.Config{})
	if err != nil {
		panic(err)
	}
	if err := s.CreateTables(ctx); err != nil {
		panic(err)
	}

	_ = s.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 2, PerUserLimit: 1})
	order := stock.Order{ID: "order-1", UserID: "alice", Items: []stock.Item{{SKU: "phone", Qty: 1}}}
	fmt.Println("deduct:", s.Deduct(ctx, order))
	fmt.Println("again:", s.Deduct(ctx, order)) // idempotent: takes nothing more
	err = s.Deduct(ctx, stock.Order{ID: "order-2", UserID: "alice", Items: []stock.Item{{SKU: "phone", Qty: 1}}})
	fmt.Println("limit reached:", errors.Is(err, stock.ErrLimitReached))
	fmt.Println("confirm:", s.Confirm(ctx, "order-1"))
	lv, _ := s.Levels(ctx, "phone")
	fmt.Printf("available %d, held %d, sold %d\n", lv.Available, lv.Held, lv.Sold)
	// Output:
	// deduct: <nil>
	// again: <nil>
	// limit reached: true
	// confirm: <nil>
	// available 1, held 0, sold 1
}
