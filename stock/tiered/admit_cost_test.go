package tiered_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stockguard/stockguard/stock/tiered"
)

// The Admitter sheds load while the hand-off lags: a new order it turns
// away is answered before the gate, at no cost to it (DESIGN, bounded
// cost): no gate call, whatever lets the retry of a half-way order
// through.
func TestNewOrderTurnedAwayCostsNoGateRoundTrip(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	f.sale("a", 10, 10, 0, 0)
	a := &admitter{}
	m := tiered.New(f.gate, f.record, tiered.Config{Clock: f.clock, Recorder: a})
	a.busy.Store(true)
	before := f.gate.Calls("Orders") + f.gate.Calls("Deduct")
	for _, id := range []string{"n1", "n2", "n3"} {
		if _, err := m.Place(ctx, ord(id, 1)); !errors.Is(err, tiered.ErrNotAdmitted) {
			t.Fatalf("new order %s while the recorder refuses: %v, want ErrNotAdmitted", id, err)
		}
	}
	if n := f.gate.Calls("Orders") + f.gate.Calls("Deduct") - before; n != 0 {
		t.Errorf("3 new orders turned away by Admit: %d gate calls, want 0", n)
	}
}
