package tiered_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A business error is final: "the order holds nothing at either tier".
// A Revert whose record step failed leaves o1 reverted at the gate and
// held at the record; a Confirm then answers a business refusal (one the
// shop acts on: it refunds the buyer), and the record must not hold the
// order after it. The gate then loses its data (flushed and refilled, or
// answering stock.ErrUnavailable before its rebuild), and a second
// Confirm of the same order, decided by the record before the gate
// deadline, must not sell the order told "closed".
func TestConfirmClosedAnswerIsFinal(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(f *fixture) (restore func())
	}{
		{"gate flushed", func(f *fixture) func() { f.loseGateData(7, "a"); return func() {} }},
		{"gate unavailable", func(f *fixture) func() {
			f.gate.SetFault(stocktest.Unavailable)
			return func() { f.gate.SetFault(stocktest.Healthy) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, false)
			ctx := t.Context()
			if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
				t.Fatal(err)
			}
			f.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Revert"))
			if err := f.m.Revert(ctx, "o1"); err == nil {
				t.Fatal("Revert with the record down: nil")
			}
			f.record.SetFault(stocktest.Healthy)

			err1 := f.m.Confirm(ctx, "o1")
			if !stock.IsBusiness(err1) {
				t.Fatalf("first Confirm: %v, want a business answer", err1)
			}
			in, err := f.record.Manager.(stock.OrderReader).Orders(ctx, []string{"o1"})
			if err != nil {
				t.Fatal(err)
			}
			if in[0].State == stock.StateHeld {
				t.Errorf("Confirm answered %v (final: holds nothing at either tier), but the record still holds o1", err1)
			}
			restore := tc.lose(f)
			err2 := f.m.Confirm(ctx, "o1")
			restore()
			if err2 == nil {
				t.Errorf("Confirm answered %v, then a second Confirm of o1 answered nil: the order refused as closed is sold", err1)
			}
		})
	}
}
