package stocktest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A backend's conformance test, as its author writes it in a _test.go file
// of the backend's package: go test runs every case of the suite as a
// subtest of TestConformance, each on a fresh, empty store from the
// factory. The factory must read time only from the clock it is given (the
// suite moves it to expire holds) and must isolate each store: new tables
// or a new key prefix per call, removed in t.Cleanup. memstock stands in
// for the backend here.
func ExampleRun() {
	TestConformance := func(t *testing.T) {
		stocktest.Run(t, func(t *testing.T, clock stock.Clock) stock.Manager {
			return memstock.New(clock) // your backend, empty, reading time from clock
		})
	}
	_ = TestConformance // in your package: func TestConformance(t *testing.T) { ... }
}

// A Clock moves only when told to, so a test of holds and their deadlines
// never sleeps: the hold is still live a minute before its deadline and
// returned by the reclaimer a minute after it.
func ExampleClock() {
	ctx := context.Background()
	clock := stocktest.NewClock(stocktest.Epoch)
	shop := memstock.New(clock) // any backend that reads time from its Clock

	_ = shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 5, HoldTTL: 15 * time.Minute})
	_ = shop.Deduct(ctx, stock.Order{ID: "o-1", Items: []stock.Item{{SKU: "phone", Qty: 2}}})

	clock.Advance(14 * time.Minute)
	early, _ := shop.ReclaimExpired(ctx, 10)
	clock.Advance(2 * time.Minute)
	late, _ := shop.ReclaimExpired(ctx, 10)
	fmt.Println("returned at 14m:", len(early))
	fmt.Println("returned at 16m:", len(late), late[0].OrderID, late[0].Qty)
	fmt.Println("paid too late:", errors.Is(shop.Confirm(ctx, "o-1"), stock.ErrHoldExpired))
	// Output:
	// returned at 14m: 0
	// returned at 16m: 1 o-1 2
	// paid too late: true
}

// Code built on a stock.Manager is tested against a Faulty wrapped around
// a store. Here the code under test is a checkout that retries an
// infrastructure failure with the same order ID, as the contract asks:
// three replies are lost after the store applied the Deduct, and the
// units are still taken once.
func ExampleFaulty() {
	ctx := context.Background()
	store := stocktest.NewFaulty(memstock.New(nil))
	_ = store.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 5})

	checkout := func(m stock.Manager, o stock.Order) error {
		var err error
		for range 3 {
			if err = m.Deduct(ctx, o); err == nil || stock.IsBusiness(err) {
				return err
			}
		}
		return err
	}
	order := stock.Order{ID: "o-1", UserID: "ann", Items: []stock.Item{{SKU: "phone", Qty: 1}}}

	store.SetFaultFor(stocktest.LostReply, stocktest.OnMethod("Deduct"))
	err := checkout(store, order)
	fmt.Println("replies lost:", errors.Is(err, stocktest.ErrInjected), store.Calls("Deduct"), "calls")

	store.SetFault(stocktest.Healthy)
	fmt.Println("network back:", checkout(store, order))

	lv, _ := store.Levels(ctx, "phone")
	fmt.Printf("available %d, held %d\n", lv.Available, lv.Held)
	// Output:
	// replies lost: true 3 calls
	// network back: <nil>
	// available 4, held 1
}

// ExampleRun's test, run on a Healthy Faulty around memstock: a Faulty
// forwards every call and every interface the suite needs to the store it
// wraps, so it keeps the contract.
func TestRunOnAHealthyFaulty(t *testing.T) {
	stocktest.Run(t, func(t *testing.T, clock stock.Clock) stock.Manager {
		return stocktest.NewFaulty(memstock.New(clock))
	})
}
