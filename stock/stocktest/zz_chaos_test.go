package stocktest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Every call races on one order ID at a time (Deduct, Confirm, Revert,
// RevertItems, ExtendHold): afterwards the SKU's counts agree with what
// Orders says the order still takes, and units are conserved.
func TestZZOneOrderAllCallsRaceBooksBalance(t *testing.T) {
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		rd, ok := m.(stock.OrderReader)
		if !ok {
			t.Skip("no OrderReader")
		}
		pr, _ := m.(stock.PartialReverter)
		x, _ := m.(stock.HoldExtender)
		zzSale(t, m, stock.Listing{SKU: "a", Units: 1000, PerUserLimit: 1000, HoldTTL: time.Minute, MaxHoldTTL: time.Hour})
		zzSale(t, m, stock.Listing{SKU: "b", Units: 1000, HoldTTL: time.Minute, MaxHoldTTL: time.Hour})
		var wantA, wantB int64 // what the orders still take, per Orders
		var soldA, soldB int64
		for round := range 12 {
			id := fmt.Sprintf("o%d", round)
			o := zzOrder(id, "u1", zzItem("a", 4), zzItem("b", 2))
			var wg sync.WaitGroup
			calls := []func() error{
				func() error { return m.Deduct(ctx, o) },
				func() error { return m.Deduct(ctx, o) },
				func() error { return m.Confirm(ctx, id) },
				func() error { return m.Revert(ctx, id) },
			}
			if round%3 == 0 {
				calls = calls[:3] // no Revert: some orders stay
			}
			if pr != nil {
				calls = append(calls, func() error {
					return pr.RevertItems(ctx, stock.Return{OpID: "r1", OrderID: id, Items: []stock.Item{zzItem("a", 1)}})
				}, func() error {
					return pr.RevertItems(ctx, stock.Return{OpID: "r2", OrderID: id, Items: []stock.Item{zzItem("b", 1), zzItem("a", 1)}})
				})
			}
			if x != nil {
				calls = append(calls, func() error { return x.ExtendHold(ctx, id, clock.Now().Add(10*time.Minute)) })
			}
			answers := make([]string, len(calls))
			for i, c := range calls {
				wg.Go(func() { answers[i] = zzClass(zzRetry(c)) })
			}
			wg.Wait()
			in, err := rd.Orders(ctx, []string{id})
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
			n, err := rd.UserUnits(ctx, "a", "u1")
			if err != nil || n != wantA+soldA {
				t.Fatalf("round %d: UserUnits = %d, %v; want %d", round, n, err, wantA+soldA)
			}
		}
	})
}
