package tiered_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// retryAsAllowed calls call again while it answers what the contract says
// to retry on (stock.ErrContention, stock.ErrUnknownOutcome).
func retryAsAllowed(call func() error) error {
	var err error
	for attempt := range 300 {
		err = call()
		if !errors.Is(err, stock.ErrContention) && !errors.Is(err, stock.ErrUnknownOutcome) {
			return err
		}
		time.Sleep(time.Duration(1+attempt%10) * time.Millisecond)
	}
	return err
}

// A client whose Deduct timed out cancels with Revert while the Deduct is
// still in flight: "Revert returns what the order took, and the user's
// quota, exactly once". Once both have answered, the order either holds
// its units (and Orders says held) or holds none: a Revert that found the
// order at neither tier when it asked, and then reverted the record's
// copy, left the gate's hold in place until its deadline.
func TestRevertRacingItsDeductLeavesNoHoldBehind(t *testing.T) {
	for _, p := range readerPairs() {
		t.Run(p.redis+"+"+p.db, func(t *testing.T) {
			ctx := t.Context()
			clock := stocktest.NewClock(stocktest.Epoch)
			m, _, _ := readerShop(t, p, clock)
			if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10000, HoldTTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			var held int64
			for round := range 60 {
				id := fmt.Sprintf("o%d", round)
				o := stock.Order{ID: id, UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 3}}}
				var wg sync.WaitGroup
				var derr, rerr error
				wg.Go(func() { derr = retryAsAllowed(func() error { return m.Deduct(ctx, o) }) })
				wg.Go(func() { rerr = retryAsAllowed(func() error { return m.Revert(ctx, id) }) })
				wg.Wait()
				in, err := m.Orders(ctx, []string{id})
				if err != nil {
					t.Fatal(err)
				}
				if in[0].State == stock.StateHeld {
					held += 3
				}
				lv, err := m.Levels(ctx, "a")
				if err != nil {
					t.Fatal(err)
				}
				if lv.Held != held || lv.Available != 10000-held {
					t.Fatalf("round %d: Deduct %v, Revert %v; Orders says %v; levels %+v, want held %d",
						round, derr, rerr, in[0].State, lv, held)
				}
			}
		})
	}
}

// Every call races on one order ID at a time (Deduct twice, Confirm,
// Revert, RevertItems twice, ExtendHold): afterwards the SKUs' counts
// agree with what Orders says the order still takes, units are conserved,
// and the user's quota counts what the orders still take.
func TestEveryCallRacingOnOneOrderKeepsTheBooks(t *testing.T) {
	for _, p := range readerPairs() {
		t.Run(p.redis+"+"+p.db, func(t *testing.T) {
			ctx := t.Context()
			clock := stocktest.NewClock(stocktest.Epoch)
			m, _, _ := readerShop(t, p, clock)
			for _, l := range []stock.Listing{
				{SKU: "a", Units: 1000, PerUserLimit: 1000, HoldTTL: time.Minute, MaxHoldTTL: time.Hour},
				{SKU: "b", Units: 1000, HoldTTL: time.Minute, MaxHoldTTL: time.Hour},
			} {
				if err := m.PutOnSale(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
			var wantA, wantB int64 // what the orders still take, per Orders
			var soldA, soldB int64
			for round := range 12 {
				id := fmt.Sprintf("o%d", round)
				o := stock.Order{ID: id, UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 4}, {SKU: "b", Qty: 2}}}
				calls := []func() error{
					func() error { return m.Deduct(ctx, o) },
					func() error { return m.Deduct(ctx, o) },
					func() error { return m.Confirm(ctx, id) },
					func() error { return m.Revert(ctx, id) },
				}
				if round%3 == 0 {
					calls = calls[:3] // no Revert: some orders stay
				}
				calls = append(calls, func() error {
					return m.RevertItems(ctx, stock.Return{OpID: "r1", OrderID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}})
				}, func() error {
					return m.RevertItems(ctx, stock.Return{OpID: "r2", OrderID: id, Items: []stock.Item{{SKU: "b", Qty: 1}, {SKU: "a", Qty: 1}}})
				}, func() error { return m.ExtendHold(ctx, id, clock.Now().Add(10*time.Minute)) })
				answers := make([]string, len(calls))
				var wg sync.WaitGroup
				for i, c := range calls {
					wg.Go(func() { answers[i] = fmt.Sprint(retryAsAllowed(c)) })
				}
				wg.Wait()
				in, err := m.Orders(ctx, []string{id})
				if err != nil {
					t.Fatal(err)
				}
				left := map[string]int64{}
				for _, it := range in[0].Items {
					left[it.SKU] += it.Qty
				}
				for _, it := range in[0].Returned {
					left[it.SKU] -= it.Qty
				}
				switch in[0].State {
				case stock.StateHeld:
					wantA += left["a"]
					wantB += left["b"]
				case stock.StateConfirmed:
					soldA += left["a"]
					soldB += left["b"]
				}
				la, _ := m.Levels(ctx, "a")
				lb, _ := m.Levels(ctx, "b")
				if la.Held != wantA || lb.Held != wantB || la.Sold != soldA || lb.Sold != soldB ||
					la.Available+la.Held+la.Sold != 1000 || lb.Available+lb.Held+lb.Sold != 1000 {
					t.Fatalf("round %d: answers (Deduct, Deduct, Confirm[, Revert], RevertItems r1, RevertItems r2, ExtendHold) %q; order %+v; levels a %+v b %+v; want held %d/%d sold %d/%d, conserved",
						round, answers, in[0], la, lb, wantA, wantB, soldA, soldB)
				}
				n, err := m.UserUnits(ctx, "a", "u1")
				if err != nil || n != wantA+soldA {
					t.Fatalf("round %d: UserUnits = %d, %v; want %d", round, n, err, wantA+soldA)
				}
			}
		})
	}
}
