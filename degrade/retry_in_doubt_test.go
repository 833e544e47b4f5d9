package degrade_test

import (
	"errors"
	"testing"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// The first attempt of an order reached the gate, which took it, and its
// reply was lost: ErrUnknownOutcome. The caller retries with the same
// order ID, as the outcome rule says, while the gate refuses connections
// and the breaker has not opened yet. The retry proved nothing (nothing
// was sent), and the order is held at the gate: its answer must still
// match stock.ErrUnknownOutcome, not say that nothing was applied (a
// refused dial alone), which tells the caller the order was not taken.
func TestRetryOfAnOrderInDoubtStaysUnknownWhileTheGateRefuses(t *testing.T) {
	f := newFlowFixture(t, degrade.Config{})
	ctx := t.Context()
	if err := f.d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
		t.Fatal(err)
	}
	f.gate.SetFault(stocktest.LostReply)
	if err := f.buy("o1"); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("first attempt: %v, want ErrUnknownOutcome", err)
	}
	f.gate.SetFault(stocktest.Down)
	if s := f.d.State("a"); s != degrade.Primary {
		t.Fatalf("breaker %v after one failure, want Primary", s)
	}
	err := f.buy("o1")
	if lv := f.levels(f.gate.Manager); lv.Held != 1 {
		t.Fatalf("gate holds %d, want 1 (the first attempt took the order)", lv.Held)
	}
	if !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("retry of the order in doubt with the gate refusing: %v; it does not match ErrUnknownOutcome, so it says nothing was applied, yet the gate holds the order", err)
	}
}
