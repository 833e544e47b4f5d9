package otelstock_test

import (
	"testing"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/otelstock"
)

// Promise (observe.Correction.Ended, reconcile.ActionEnded; the metric
// stockguard.reconcile.units: "Units of drift reconcile found ..., by
// action"): a pass that reverted at the gate 3 units of holds whose orders
// the record had returned ("ended", Delta 0, Ended 3) shows those units in
// the exported metrics. The adapter counts only |Delta|, so an "ended"
// finding exports 0 units and observe.Correction.Ended is dropped.
func TestZZEndedUnitsAreExported(t *testing.T) {
	t.Parallel()
	h := newHarness(t, otelstock.Config{})
	h.a.Observer().Correction(observe.Correction{SKU: "a", Action: "ended", Delta: 0, Ended: 3})
	ms := h.collect(t)
	u := metric(t, ms, "stockguard.reconcile.units", "{unit}")
	if n := sum(t, u, otelstock.KeyAction.String("ended")); n != 3 {
		t.Errorf("stockguard.reconcile.units{action=ended}: %d, want the 3 units the pass ended", n)
	}
}
