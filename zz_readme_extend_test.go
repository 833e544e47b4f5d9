package stockguard_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
)

// README, "Longer and per-order holds", as it stands (the test's clock for
// time.Now()):
//
//	shop.PutOnSale(ctx, stock.Listing{SKU: "tv", Units: 5, HoldTTL: 10 * time.Minute, MaxHoldTTL: 30 * time.Minute})
//	// An order paid by bank transfer asks for a longer hold; one paid by card a shorter one.
//	shop.Deduct(ctx, stock.Order{ID: "o-9", Items: items, HoldTTL: 25 * time.Minute})
//	// 3-D Secure is slow: push the deadline out.
//	shop.ExtendHold(ctx, "o-9", time.Now().Add(5*time.Minute))
//
// The last call is to "push the deadline out". The order's deadline is
// now + 25m, and an ExtendHold to now + 5m is earlier: "an earlier one is a
// no-op" (the bullet below the block). The block's ExtendHold changes
// nothing, so a reader who copies it believes a slow payment has more time
// when it has none.
func TestREADMEExtendHoldBlockPushesTheDeadlineOut(t *testing.T) {
	shop, _, clock := shopOn(t, stockguard.Config{})
	ctx := t.Context()
	items := []stock.Item{{SKU: "tv", Qty: 1}}
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "tv", Units: 5, HoldTTL: 10 * time.Minute, MaxHoldTTL: 30 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := shop.Deduct(ctx, stock.Order{ID: "o-9", Items: items, HoldTTL: 25 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	before := deadlineOf(t, shop, "o-9")
	if err := shop.ExtendHold(ctx, "o-9", clock.Now().Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if after := deadlineOf(t, shop, "o-9"); !after.After(before) {
		t.Fatalf("the README's ExtendHold (to now+5m) left o-9's deadline at %v (now+%v): not pushed out",
			after, after.Sub(clock.Now()))
	}
}

func deadlineOf(t *testing.T, shop *stockguard.Shop, id string) time.Time {
	t.Helper()
	got, err := shop.Orders(t.Context(), []string{id})
	if err != nil || len(got) != 1 {
		t.Fatalf("Orders(%s): %+v, %v", id, got, err)
	}
	return got[0].Deadline
}
