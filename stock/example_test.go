package stock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
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

// A partial refund: the buyer keeps one of three units, and a retry of the
// refund (same operation ID) gives nothing back twice. Every shipped
// backend is a stock.PartialReverter.
func ExamplePartialReverter() {
	ctx := context.Background()
	shop := memstock.New(nil)
	_ = shop.PutOnSale(ctx, stock.Listing{SKU: "mug", Units: 10, PerUserLimit: 3})
	_ = shop.Deduct(ctx, stock.Order{ID: "o-7", UserID: "alice", Items: []stock.Item{{SKU: "mug", Qty: 3}}})
	_ = shop.Confirm(ctx, "o-7")

	refund := stock.Return{OpID: "refund-1", OrderID: "o-7", Items: []stock.Item{{SKU: "mug", Qty: 2}}}
	fmt.Println(shop.RevertItems(ctx, refund), shop.RevertItems(ctx, refund)) // the retry changes nothing
	tooMuch := stock.Return{OpID: "refund-2", OrderID: "o-7", Items: []stock.Item{{SKU: "mug", Qty: 2}}}
	fmt.Println(errors.Is(shop.RevertItems(ctx, tooMuch), stock.ErrExceedsOrder))

	lv, _ := shop.Levels(ctx, "mug")
	mine, _ := shop.UserUnits(ctx, "mug", "alice")
	info, _ := shop.Orders(ctx, []string{"o-7"})
	fmt.Printf("available %d, sold %d; alice owns %d\n", lv.Available, lv.Sold, mine)
	fmt.Println(info[0].State, info[0].Items, info[0].Returned)
	// Output:
	// <nil> <nil>
	// true
	// available 9, sold 1; alice owns 1
	// confirmed [{mug 3}] [{mug 2}]
}

// A slow payment: the order asks for a shorter hold than the SKU's default,
// then pushes its deadline out while 3-D Secure runs, within the SKU's
// MaxHoldTTL. Every shipped backend is a stock.HoldExtender.
func ExampleHoldExtender() {
	ctx := context.Background()
	clock := stocktest.NewClock(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
	shop := memstock.New(clock)
	_ = shop.PutOnSale(ctx, stock.Listing{SKU: "tv", Units: 5, HoldTTL: 10 * time.Minute, MaxHoldTTL: 30 * time.Minute})

	_ = shop.Deduct(ctx, stock.Order{ID: "o-9", Items: []stock.Item{{SKU: "tv", Qty: 1}}, HoldTTL: 5 * time.Minute})
	start := clock.Now()
	fmt.Println(shop.ExtendHold(ctx, "o-9", start.Add(20*time.Minute)))
	fmt.Println(errors.Is(shop.ExtendHold(ctx, "o-9", start.Add(31*time.Minute)), stock.ErrHoldTooLong))

	clock.Advance(15 * time.Minute) // past the first deadline, before the new one
	fmt.Println(shop.Confirm(ctx, "o-9"))
	// Output:
	// <nil>
	// true
	// <nil>
}
