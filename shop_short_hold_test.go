package stockguard_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// With the grace left to the flow (RecordGrace zero: the hold time), a
// listing whose hold time is not longer than the reclaimer's interval is
// refused, as a RecordGrace that short is, and nothing is put on sale; a
// longer one, or the same with a RecordGrace set, is put on sale.
func TestShopRefusesAHoldTimeTheImplicitGraceCannotCover(t *testing.T) {
	shop, _, _ := shopOn(t, stockguard.Config{Reclaim: stock.ReclaimerConfig{Interval: 2 * time.Second}})
	ctx := t.Context()
	err := shop.PutOnSale(ctx, stock.Listing{SKU: "short", Units: 5, HoldTTL: 2 * time.Second})
	if !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("hold time 2s with a 2s reclaim interval and no RecordGrace: %v, want ErrInvalid", err)
	}
	if _, err := shop.Record().Available(ctx, "short"); !errors.Is(err, stock.ErrUnknownSKU) {
		t.Fatalf("the refused listing's SKU at the record: %v, want ErrUnknownSKU", err)
	}
	if _, err := shop.Gate().Available(ctx, "short"); !errors.Is(err, stock.ErrUnknownSKU) {
		t.Fatalf("the refused listing's SKU at the gate: %v, want ErrUnknownSKU", err)
	}
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "long", Units: 5, HoldTTL: 3 * time.Second}); err != nil {
		t.Fatalf("hold time 3s: %v", err)
	}
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "default", Units: 5}); err != nil {
		t.Fatalf("the default hold time: %v", err)
	}
	graced, _, _ := shopOn(t, stockguard.Config{Reclaim: stock.ReclaimerConfig{Interval: 2 * time.Second},
		Flow: tiered.Config{RecordGrace: 5 * time.Second}})
	if err := graced.PutOnSale(ctx, stock.Listing{SKU: "short", Units: 5, HoldTTL: time.Second}); err != nil {
		t.Fatalf("hold time 1s with a 5s RecordGrace: %v", err)
	}
}
