package sqlstock_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A slow payment gets a longer hold, then part of the paid order is
// refunded, once however often the refund is retried.
func ExampleStore_RevertItems() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sqlstock-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=journal_mode(WAL)")
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

	// Holds last 10 minutes, and may be stretched to an hour.
	_ = s.PutOnSale(ctx, stock.Listing{SKU: "mug", Units: 10, HoldTTL: 10 * time.Minute, MaxHoldTTL: time.Hour})
	order := stock.Order{ID: "order-1", UserID: "alice", Items: []stock.Item{{SKU: "mug", Qty: 3}},
		HoldTTL: 5 * time.Minute} // this payment method answers within 5 minutes
	fmt.Println("deduct:", s.Deduct(ctx, order))
	// 3-D Secure takes longer: 30 more minutes.
	fmt.Println("extend:", s.ExtendHold(ctx, "order-1", time.Now().Add(35*time.Minute)))
	fmt.Println("confirm:", s.Confirm(ctx, "order-1"))

	// One mug comes back: a partial refund, retried with the same OpID.
	refund := stock.Return{OpID: "refund-77", OrderID: "order-1", Items: []stock.Item{{SKU: "mug", Qty: 1}}}
	fmt.Println("refund:", s.RevertItems(ctx, refund))
	fmt.Println("retried:", s.RevertItems(ctx, refund))
	lv, _ := s.Levels(ctx, "mug")
	fmt.Printf("available %d, sold %d\n", lv.Available, lv.Sold)
	info, _ := s.Orders(ctx, []string{"order-1"})
	fmt.Println(info[0].State, "items", info[0].Items, "returned", info[0].Returned)
	// Output:
	// deduct: <nil>
	// extend: <nil>
	// confirm: <nil>
	// refund: <nil>
	// retried: <nil>
	// available 8, sold 2
	// confirmed items [{mug 3}] returned [{mug 1}]
}
