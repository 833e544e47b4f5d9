package stockguard_test

import (
	"errors"
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
)

// Through the Shop: a Confirm racing a Revert (the Revert's gate step ran,
// then the Confirm, then the Revert's record step) answers
// stock.ErrOrderClosed and the order reads reverted, as the flow's doc
// promises. The gate's Redis then loses its data: the order now reads
// expired, and Confirm answers stock.ErrHoldExpired. The record, which is
// the truth, keeps the order as expired.
func TestZZShopRevertedByRaceAfterFlush(t *testing.T) {
	shop, mr, _ := shopOn(t, stockguard.Config{})
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10}); err != nil {
		t.Fatal(err)
	}
	if err := shop.Deduct(ctx, order("o1", 3)); err != nil {
		t.Fatal(err)
	}
	if err := shop.Gate().Revert(ctx, "o1"); err != nil { // the Revert's gate step
		t.Fatal(err)
	}
	if err := shop.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("Confirm racing the Revert: %v, want ErrOrderClosed", err)
	}
	if err := shop.Revert(ctx, "o1"); err != nil {
		t.Fatalf("the Revert goes on: %v", err)
	}
	mr.FlushAll()
	var err error
	for range 5 {
		if err = shop.Confirm(ctx, "o1"); err == nil || stock.IsBusiness(err) {
			break
		}
	}
	in, rerr := shop.Orders(ctx, []string{"o1"})
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, stock.ErrOrderClosed) || in[0].State != stock.StateReverted {
		t.Errorf("after the flush: Confirm %v, Orders %v; want ErrOrderClosed and reverted, as before it", err, in[0].State)
	}
}
