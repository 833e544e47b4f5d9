package stock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
)

// The life of two orders on any stock.Manager: one paid, one cancelled, and
// a third buyer turned away by the per-user limit.
func Example() {
	ctx := context.Background()
	var shop stock.Manager = memstock.New(nil)

	_ = shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 3, PerUserLimit: 1, HoldTTL: 15 * time.Minute})

	buy := func(orderID, user string) error {
		return shop.Deduct(ctx, stock.Order{ID: orderID, UserID: user, Items: []stock.Item{{SKU: "phone", Qty: 1}}})
	}
	fmt.Println(buy("o-1", "alice"), buy("o-2", "bob"))
	fmt.Println(errors.Is(buy("o-3", "alice"), stock.ErrLimitReached))
	fmt.Println(buy("o-1", "alice")) // a retry takes nothing more

	fmt.Println(shop.Confirm(ctx, "o-1"), shop.Revert(ctx, "o-2"), shop.Revert(ctx, "o-2"))
	lv, _ := shop.Levels(ctx, "phone")
	fmt.Printf("available %d, held %d, sold %d\n", lv.Available, lv.Held, lv.Sold)
	// Output:
	// <nil> <nil>
	// true
	// <nil>
	// <nil> <nil> <nil>
	// available 2, held 0, sold 1
}
