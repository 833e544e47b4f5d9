package stockguard_test

import (
	"context"
	"errors"
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

// The record's grace is what lets a Confirm that reached the gate within
// the hold time finish at the record, and the record's deadlines are
// capped at stock.MaxHoldTTL from the Deduct: a listing whose longest
// hold comes within the reclaimer's interval of that cap would leave the
// record no grace, and a buyer paying a second before the deadline would
// be refused with ErrHoldExpired. Shop.PutOnSale refuses such a listing,
// with nothing written; one that leaves the record more grace than that
// sells to that buyer.
func TestShopHoldNearMaxHoldTTLKeepsTheRecordsGrace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		grace   time.Duration
		l       stock.Listing
		refused bool
	}{
		{"20 days, default grace", 0, stock.Listing{HoldTTL: 20 * 24 * time.Hour}, false},
		{"an hour short of the cap, default grace", 0, stock.Listing{HoldTTL: stock.MaxHoldTTL - time.Hour}, false},
		{"an hour short of the cap, RecordGrace 1h", time.Hour, stock.Listing{HoldTTL: stock.MaxHoldTTL - time.Hour}, false},
		{"the cap, RecordGrace 1h", time.Hour, stock.Listing{HoldTTL: stock.MaxHoldTTL}, true},
		{"the cap, default grace", 0, stock.Listing{HoldTTL: stock.MaxHoldTTL}, true},
		{"within the reclaimer's interval of the cap", 0, stock.Listing{HoldTTL: stock.MaxHoldTTL - time.Second}, true},
		{"1m hold extended up to the cap", 0, stock.Listing{HoldTTL: time.Minute, MaxHoldTTL: stock.MaxHoldTTL}, true},
		{"1m hold extended up to an hour short of the cap", 0, stock.Listing{HoldTTL: time.Minute, MaxHoldTTL: stock.MaxHoldTTL - time.Hour}, false},
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
			l := tc.l
			l.SKU, l.Units = "phone", 1
			err := shop.PutOnSale(ctx, l)
			if tc.refused {
				if !errors.Is(err, stock.ErrInvalid) {
					t.Fatalf("PutOnSale(%+v): %v, want an error matching ErrInvalid", l, err)
				}
				for name, m := range map[string]stock.Manager{"gate": shop.Gate(), "record": shop.Record()} {
					if _, err := m.Levels(ctx, "phone"); !errors.Is(err, stock.ErrUnknownSKU) {
						t.Errorf("%s after a refused PutOnSale: %v, want ErrUnknownSKU (nothing written)", name, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := shop.Deduct(ctx, order("o1", 1)); err != nil {
				t.Fatal(err)
			}
			deadline := clock.Now().Add(l.EffectiveHoldTTL())
			if l.MaxHoldTTL != 0 {
				deadline = clock.Now().Add(l.MaxHoldTTL)
				if err := shop.ExtendHold(ctx, "o1", deadline); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(deadline.Sub(clock.Now()) - time.Second) // the buyer pays a second before the deadline
			err = shop.Confirm(ctx, "o1")
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
