package tiered_test

import (
	"errors"
	"testing"

	"github.com/stockguard/stockguard/stock"
)

// A sale confirmed at the record alone (a fallback's Confirm while the gate
// was set aside) whose gate hold then expired there (the flow's reclaimer
// keeps the record's sale), then refunded by Revert: Orders says refunded;
// Confirm and a repeat Deduct must answer stock.ErrOrderClosed, as on every
// backend for a refunded order, though the gate says the hold expired.
func TestRefundedSaleAnswersClosed(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	o := saleAtTheRecordAlone(t, f)
	if _, err := f.m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Revert(ctx, "o1"); err != nil {
		t.Fatalf("Revert (refund) of the sale: %v", err)
	}
	st := stateOf(t, f.m, "o1")
	cerr := f.m.Confirm(ctx, "o1")
	derr := f.m.Deduct(ctx, o)
	if st != stock.StateRefunded || !errors.Is(cerr, stock.ErrOrderClosed) || !errors.Is(derr, stock.ErrOrderClosed) {
		t.Errorf("refunded sale: Orders %v, Confirm %v, repeat Deduct %v; want refunded, ErrOrderClosed, ErrOrderClosed", st, cerr, derr)
	}
}
