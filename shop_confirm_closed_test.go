package stockguard_test

import (
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
)

// Through the Shop: a Revert that stopped after its gate step (the
// process died before the record's) leaves o1 reverted at the gate and
// held at the record. The buyer's Confirm answers stock.ErrOrderClosed,
// a final refusal (the shop refunds the payment). The gate's Redis then
// loses its data; a retry of the same Confirm (another node, a client
// retry) answers nil: the order told closed is sold.
func TestShopConfirmClosedStaysClosed(t *testing.T) {
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
	err1 := shop.Confirm(ctx, "o1")
	if !stock.IsBusiness(err1) {
		t.Fatalf("Confirm after the gate closed o1: %v", err1)
	}
	mr.FlushAll()
	var err2 error
	for range 5 {
		if err2 = shop.Confirm(ctx, "o1"); err2 == nil || stock.IsBusiness(err2) {
			break
		}
	}
	if err2 == nil {
		t.Errorf("Confirm answered %v, then a retry answered nil: sold (record %+v)", err1, levels(t, shop.Record()))
	}
}
