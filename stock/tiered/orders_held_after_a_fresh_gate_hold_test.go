package tiered_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// Orders and Confirm agree ("held means confirmable"): an order Orders
// reports held with its deadline still ahead is one a Confirm sells, and
// one a Confirm sells was reported held with its deadline ahead. The gate
// loses its data (a flush, then a rebuild with the units) and a repeat of
// the order is admitted there as a new order: the gate's fresh hold ends
// later than the record's copy, which the record answered as the repeat it
// is. Between the record copy's deadline and the gate's, the record
// refuses a Confirm: Orders must not report the gate's later deadline.
// Checked at several instants, each on a fresh flow, with a grace shorter
// than the hold time (the copy's record deadline before the gate's fresh
// one) and with the default grace (the repeat past the order's deadline).
func TestOrdersHeldAfterAFreshGateHoldMeansConfirmable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grace  time.Duration
		repeat time.Duration // when the repeat comes, after the Deduct
		checks []time.Duration
	}{
		{"grace 10s", 10 * time.Second, 30 * time.Second, []time.Duration{50, 65, 69, 75, 85} /* seconds */},
		{"default grace", 0, 70 * time.Second, []time.Duration{100, 119, 121, 125}},
	} {
		for _, at := range tc.checks {
			at := at * time.Second
			t.Run(fmt.Sprintf("%s/at %v", tc.name, at), func(t *testing.T) {
				ctx := t.Context()
				clock := stocktest.NewClock(stocktest.Epoch)
				gate := stocktest.NewFaulty(memstock.New(clock))
				m := tiered.New(gate, memstock.New(clock), tiered.Config{Clock: clock, RecordGrace: tc.grace})
				if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
					t.Fatal(err)
				}
				if err := m.Deduct(ctx, ord("o1", 3)); err != nil {
					t.Fatal(err)
				}
				g := memstock.New(clock) // the gate lost its data and was rebuilt with the units
				if err := g.PutOnSale(context.Background(), stock.Listing{SKU: "a", Units: 7, HoldTTL: time.Minute}); err != nil {
					t.Fatal(err)
				}
				gate.Manager = g
				clock.Advance(tc.repeat)
				if err := m.Deduct(ctx, ord("o1", 3)); err != nil {
					t.Logf("repeat Deduct: %v", err)
				}
				clock.Advance(at - tc.repeat)
				in, err := m.Orders(ctx, []string{"o1"})
				if err != nil {
					t.Fatal(err)
				}
				held := in[0].State == stock.StateHeld && in[0].Deadline.After(clock.Now())
				cerr := m.Confirm(ctx, "o1")
				if held && cerr != nil {
					t.Errorf("Orders says o1 held until %v (now %v), Confirm answers %v",
						in[0].Deadline.Sub(stocktest.Epoch), at, cerr)
				}
				if !held && cerr == nil {
					t.Errorf("Orders says o1 %s until %v (now %v), Confirm sold it",
						in[0].State, in[0].Deadline.Sub(stocktest.Epoch), at)
				}
			})
		}
	}
}
