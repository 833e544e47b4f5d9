package stocktest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A Revert racing the Deduct of the same order: once both have answered,
// the order either holds its units (and Orders says held) or holds none.
// "Revert returns what the order took ... exactly once".
func TestZZDeductRacingRevertLeavesNoStrayHold(t *testing.T) {
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		rd, ok := m.(stock.OrderReader)
		if !ok {
			t.Skip("no OrderReader")
		}
		zzSale(t, m, stock.Listing{SKU: "a", Units: 10000, HoldTTL: time.Minute})
		var held int64
		for round := range 60 {
			id := fmt.Sprintf("o%d", round)
			o := zzOrder(id, "u1", zzItem("a", 3))
			var wg sync.WaitGroup
			var derr, rerr error
			wg.Go(func() { derr = zzRetry(func() error { return m.Deduct(ctx, o) }) })
			wg.Go(func() { rerr = zzRetry(func() error { return m.Revert(ctx, id) }) })
			wg.Wait()
			in, err := rd.Orders(ctx, []string{id})
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
				t.Fatalf("round %d: Deduct %s, Revert %s; Orders says %v; levels %+v, want held %d",
					round, zzClass(derr), zzClass(rerr), in[0].State, lv, held)
			}
		}
	})
}
