package stockguard_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// slowConfirmRecord is a record whose Confirm takes delay (on the test's
// clock) before it reaches the database: a busy record, as under a sale.
type slowConfirmRecord struct {
	tiered.RecordStore
	clock **stocktest.Clock
	delay time.Duration
}

func (s slowConfirmRecord) Confirm(ctx context.Context, id string) error {
	(*s.clock).Advance(s.delay)
	return s.RecordStore.Confirm(ctx, id)
}

// The record's grace (Config.Flow.RecordGrace, or the hold time when it is
// zero) is what lets a Confirm that reached the gate within the hold time
// finish at the record. Shop.PutOnSale and New refuse a grace not longer
// than the reclaimer's interval, but tiered.Config.RecordHold caps the
// record's hold at stock.MaxHoldTTL, so a hold time (or an extended
// deadline) near that cap leaves the record no grace at all. A buyer who
// pays a second before the deadline, with a record that takes two
// seconds, is refused with ErrHoldExpired: the same shop with a 20-day
// hold time sells.
func TestZZPaymentWithinTheHoldTimeNearMaxHoldTTLIsSold(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grace  time.Duration
		hold   time.Duration
		extend bool // ExtendHold the order to stock.MaxHoldTTL from now
	}{
		{"control: 20 days, default grace", 0, 20 * 24 * time.Hour, false},
		{"MaxHoldTTL, RecordGrace 1h", time.Hour, stock.MaxHoldTTL, false},
		{"MaxHoldTTL, default grace", 0, stock.MaxHoldTTL, false},
		{"1m hold extended to MaxHoldTTL, default grace", 0, time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var clock *stocktest.Clock
			cfg := stockguard.Config{Flow: tiered.Config{RecordGrace: tc.grace},
				Wrap: func(g tiered.GateStore, r tiered.RecordStore) (tiered.GateStore, tiered.RecordStore) {
					return g, slowConfirmRecord{r, &clock, 2 * time.Second}
				}}
			shop, _, c := shopOn(t, cfg)
			clock = c
			ctx := t.Context()
			l := stock.Listing{SKU: "phone", Units: 1, HoldTTL: tc.hold}
			if tc.extend {
				l.MaxHoldTTL = stock.MaxHoldTTL
			}
			if err := shop.PutOnSale(ctx, l); err != nil {
				t.Fatal(err)
			}
			if err := shop.Deduct(ctx, order("o1", 1)); err != nil {
				t.Fatal(err)
			}
			deadline := clock.Now().Add(tc.hold)
			if tc.extend {
				deadline = clock.Now().Add(stock.MaxHoldTTL)
				if err := shop.ExtendHold(ctx, "o1", deadline); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(deadline.Sub(clock.Now()) - time.Second) // the buyer pays a second before the deadline
			err := shop.Confirm(ctx, "o1")
			if _, rerr := shop.ReclaimExpired(ctx, 100); rerr != nil {
				t.Fatal(rerr)
			}
			g, r := levels(t, shop.Gate()), levels(t, shop.Record())
			if err != nil || g.Sold != 1 || r.Sold != 1 {
				t.Errorf("Confirm a second before the deadline: %v; gate %+v, record %+v; want nil and the unit sold at both tiers", err, g, r)
			}
		})
	}
}
