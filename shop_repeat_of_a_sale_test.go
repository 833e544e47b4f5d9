package stockguard_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
)

// Through the Shop: a buyer pays while the breaker sends calls to the
// record alone (the fallback confirms the held order before its
// deadline); the breaker closes again; a minute and a half later, before
// any reclaim pass, the client repeats its Deduct. By the contract a
// repeated Deduct of a confirmed order returns nil, and Orders says
// confirmed.
func TestShopRepeatDeductOfAPaidOrder(t *testing.T) {
	shop, _, clock := shopOn(t, stockguard.Config{Breaker: degrade.Config{RampSteps: []float64{}}})
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := shop.Deduct(ctx, order("o1", 3)); err != nil {
		t.Fatal(err)
	}
	shop.SetMode(degrade.ForceFallback)
	if err := shop.Confirm(ctx, "o1"); err != nil {
		t.Fatalf("Confirm through the fallback: %v", err)
	}
	shop.SetMode(degrade.Auto)
	if err := shop.Deduct(ctx, order("starts-recalibration", 1)); !errors.Is(err, degrade.ErrBusy) {
		t.Fatalf("the Deduct that starts the recalibration: %v, want ErrBusy", err)
	}
	if s := waitState(t, shop); s != degrade.Primary {
		t.Fatalf("breaker %v after the recalibration, want primary", s)
	}
	clock.Advance(90 * time.Second)
	in, err := shop.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	derr := shop.Deduct(ctx, order("o1", 3))
	if in[0].State != stock.StateConfirmed || derr != nil {
		t.Errorf("paid order: Orders %v, repeat Deduct %v; want confirmed and nil", in[0].State, derr)
	}
}
