package degrade_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A FallbackLimit that is not a number is either refused by New (as a
// NaN ramp step is, with a *stock.InvalidError wrapping stock.ErrInvalid)
// or still a token bucket: "While a breaker is open, calls go to the
// fallback through one token bucket (Config.FallbackLimit, FallbackBurst);
// a refused call gets ErrBusy and nothing is written." With NaN,
// x/time/rate computes NaN tokens and admits every call, so the database
// would take the whole flood at one instant.
func TestNaNFallbackLimitIsRefusedOrLimits(t *testing.T) {
	clock := stocktest.NewClock(stocktest.Epoch)
	gate := stocktest.NewFaulty(memstock.New(clock))
	record := stocktest.NewFaulty(memstock.New(clock))
	flow := tiered.New(gate, record, tiered.Config{Clock: clock})
	d, err := degrade.New(flow, nil, degrade.Config{Clock: clock, FallbackLimit: rate.Limit(math.NaN()), FallbackBurst: 5})
	if err != nil {
		var inv *stock.InvalidError
		if !errors.Is(err, stock.ErrInvalid) || !errors.As(err, &inv) {
			t.Fatalf("New with a NaN FallbackLimit: %v, want a *stock.InvalidError wrapping stock.ErrInvalid", err)
		}
		return
	}
	t.Cleanup(d.Close)
	ctx := t.Context()
	if err := d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 1000}); err != nil {
		t.Fatal(err)
	}
	d.SetMode(degrade.ForceFallback)
	taken := 0
	for i := range 100 { // one instant: the clock does not move
		err := d.Deduct(ctx, stock.Order{ID: fmt.Sprint("o", i), Items: []stock.Item{{SKU: "a", Qty: 1}}})
		switch {
		case err == nil:
			taken++
		case !errors.Is(err, degrade.ErrBusy):
			t.Fatalf("order %d: %v", i, err)
		}
	}
	if taken > 5 {
		t.Fatalf("New accepted a NaN FallbackLimit and the fallback took %d of 100 orders at one instant, want at most FallbackBurst 5 (or New refusing the config)", taken)
	}
}
