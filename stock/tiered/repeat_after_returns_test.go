package tiered_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
)

// A repeat of an order (same ID, user, items in another line order) after
// a partial or whole return gets, at the record alone (Fallback) and
// through the flow with a gate that lost the order, the answer a single
// backend gives the same script.
func TestRepeatAfterReturnsAnswersAsABackend(t *testing.T) {
	for _, backend := range []string{"memstock", "sqlite"} {
		for _, user := range []string{"", "u1"} {
			for _, whole := range []bool{false, true} {
				t.Run(backend+"/"+user+"/"+map[bool]string{false: "part", true: "whole"}[whole], func(t *testing.T) {
					ctx := t.Context()
					f := newFixtureOn(t, backend)
					ref := memstock.New(f.clock)
					o := stock.Order{ID: "o1", UserID: user, Items: []stock.Item{{SKU: "b", Qty: 2}, {SKU: "a", Qty: 3}}}
					rep := o
					rep.Items = []stock.Item{{SKU: "a", Qty: 3}, {SKU: "b", Qty: 2}}
					ret := []stock.Return{{OpID: "r1", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}}
					if whole {
						ret = append(ret, stock.Return{OpID: "r2", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 2}, {SKU: "b", Qty: 2}}})
					}
					for _, s := range []string{"a", "b"} {
						l := stock.Listing{SKU: s, Units: 10, HoldTTL: time.Minute}
						if err := f.m.PutOnSale(ctx, l); err != nil {
							t.Fatal(err)
						}
						if err := ref.PutOnSale(ctx, l); err != nil {
							t.Fatal(err)
						}
					}
					if err := f.m.Deduct(ctx, o); err != nil {
						t.Fatal(err)
					}
					if err := ref.Deduct(ctx, o); err != nil {
						t.Fatal(err)
					}
					for _, r := range ret {
						if err := f.m.RevertItems(ctx, r); err != nil {
							t.Fatal(err)
						}
						if err := ref.RevertItems(ctx, r); err != nil {
							t.Fatal(err)
						}
					}
					for _, r := range ret {
						w := errClass(ref.RevertItems(ctx, r))
						if g := errClass(f.m.RevertItems(ctx, r)); g != w {
							t.Errorf("RevertItems %s again (gate intact): %s, a backend: %s", r.OpID, g, w)
						}
					}
					want := errClass(ref.Deduct(ctx, rep))
					if got := errClass(f.m.Fallback().Deduct(ctx, rep)); got != want {
						t.Errorf("Fallback repeat: %s, a backend: %s", got, want)
					}
					f.loseGateData(0, "a", "b") // the rebuilt gate has nothing left to sell
					if got := errClass(f.m.Deduct(ctx, rep)); got != want {
						t.Errorf("repeat refused by a gate that lost the order: %s, a backend: %s", got, want)
					}
					// the same return again (a retry), and a reused OpID with other items
					for _, r := range ret {
						w := errClass(ref.RevertItems(ctx, r))
						if g := errClass(f.m.RevertItems(ctx, r)); g != w {
							t.Errorf("RevertItems %s again (gate lost the order): %s, a backend: %s", r.OpID, g, w)
						}
					}
				})
			}
		}
	}
}
