package degrade_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A Confirm while the gate cannot be told changes nothing at the record
// and is answered as an unknown outcome while the breaker lets calls
// through (the gate may still hold the order, and a retry tells it), then
// nil once the breaker has opened (the record path decides; the gate is
// recalibrated from the record before traffic returns to it). Answered
// nil, it is a final sale: a repeat of the same Confirm after the gate's
// deadline, as a payment webhook sends, returns nil and refunds nothing,
// whether or not the reclaimer has run.
func TestRepeatOfADegradedConfirmKeepsTheSale(t *testing.T) {
	for _, reclaim := range []bool{false, true} {
		name := "before the reclaimer"
		if reclaim {
			name = "after the reclaimer"
		}
		t.Run(name, func(t *testing.T) {
			clock := stocktest.NewClock(stocktest.Epoch)
			gate := stocktest.NewFaulty(memstock.New(clock))
			record := memstock.New(clock)
			tm := tiered.New(gate, record, tiered.Config{Clock: clock})
			d := mustNew(t, tm, nil, degrade.Config{Clock: clock})
			t.Cleanup(d.Close)
			ctx := t.Context()
			if err := d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if err := d.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
				t.Fatal(err)
			}
			gate.SetFaultFor(stocktest.Down, stocktest.OnMethod("Confirm"))
			for i := 0; ; i++ {
				err := d.Confirm(ctx, "o1")
				if err == nil {
					break
				}
				if !errors.Is(err, stock.ErrUnknownOutcome) || i == 10 {
					t.Fatalf("Confirm %d with the gate down: %v, want an unknown outcome until the breaker opens, then nil", i, err)
				}
				if lv, _ := record.Levels(ctx, "a"); lv.Sold != 0 || lv.Held != 1 {
					t.Fatalf("Confirm %d answered %v, and the record decided the order: %+v, want it held", i, err, lv)
				}
			}
			gate.SetFault(stocktest.Healthy)
			clock.Advance(2 * time.Minute)
			if reclaim {
				if _, err := tm.ReclaimExpired(ctx, 10); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Confirm(ctx, "o1"); err != nil {
				t.Errorf("repeat of a Confirm that returned nil: %v, want nil", err)
			}
			if lv, err := record.Levels(ctx, "a"); err != nil || lv.Sold != 1 {
				t.Fatalf("record levels %+v, %v; want the sale (1 sold)", lv, err)
			}
		})
	}
}
