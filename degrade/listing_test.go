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

// A SKU put on sale while the traffic goes to the fallback (the tiered
// primary's record) keeps the hold time it was given: an order the
// fallback takes can be confirmed until the listing's hold time has
// passed, though the tiered reclaimer's follow-up returns it at the gate
// deadline it reads off the record.
func TestFallbackListingKeepsItsHoldTime(t *testing.T) {
	for _, grace := range []time.Duration{0, 5 * time.Minute} {
		t.Run("grace "+grace.String(), func(t *testing.T) {
			clock := stocktest.NewClock(stocktest.Epoch)
			record := memstock.New(clock)
			tm := tiered.New(memstock.New(clock), record, tiered.Config{Clock: clock, RecordGrace: grace})
			d := mustNew(t, tm, nil, degrade.Config{Clock: clock})
			t.Cleanup(d.Close)
			ctx := t.Context()
			d.SetMode(degrade.ForceFallback)
			if err := d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if err := d.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(40 * time.Second)
			if _, err := tm.ReclaimExpired(ctx, 10); err != nil {
				t.Fatal(err)
			}
			if err := d.Confirm(ctx, "o1"); err != nil {
				t.Fatalf("Confirm 40s into a 1-minute hold: %v, want nil", err)
			}
		})
	}
}

// A fallback order the reclaimer returned after the listing's hold time is
// answered as expired, on the node that took it as on any other: the
// record alone says only that the order was closed.
func TestLatePayerOfAFallbackOrderGetsHoldExpired(t *testing.T) {
	clock := stocktest.NewClock(stocktest.Epoch)
	record := memstock.New(clock)
	tm := tiered.New(memstock.New(clock), record, tiered.Config{Clock: clock})
	d := mustNew(t, tm, nil, degrade.Config{Clock: clock})
	t.Cleanup(d.Close)
	ctx := t.Context()
	d.SetMode(degrade.ForceFallback)
	if err := d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := d.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
		t.Fatal(err)
	}
	d.SetMode(degrade.Auto)
	clock.Advance(61 * time.Second)
	if _, err := tm.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	other := mustNew(t, tm, nil, degrade.Config{Clock: clock})
	t.Cleanup(other.Close)
	for name, n := range map[string]*degrade.Manager{"taker": d, "other node": other} {
		if err := n.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
			t.Errorf("%s: Confirm past the hold time: %v, want ErrHoldExpired", name, err)
		}
	}
}
