package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// With a Recorder: a recorded order cancelled at the record alone (another
// node's breaker open: the Fallback's Revert), while the gate still holds
// it until its deadline. Orders says reverted, and by the contract a
// repeat Deduct of a reverted order answers stock.ErrOrderClosed and
// takes nothing. The flow asks only the gate, which still holds the
// order: the repeat answers nil (Pending) and hands the order off again;
// its Settle then answers ErrOrderClosed. The synchronous flow answers
// ErrOrderClosed.
func TestZZAsyncRepeatOfAnOrderRevertedAtTheRecordAlone(t *testing.T) {
	f := newFixture(t, true)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	o := stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 2}}}
	if err := f.m.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Settle(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Fallback().Revert(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	if st := zzState(t, f.m, "o1"); st != stock.StateReverted {
		t.Fatalf("Orders after the Revert: %v, want reverted", st)
	}
	if err := f.m.Deduct(ctx, o); !errors.Is(err, stock.ErrOrderClosed) {
		t.Errorf("repeat Deduct of the reverted order: %v, want ErrOrderClosed", err)
	}
}
