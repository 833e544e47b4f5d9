package otelstock_test

import (
	"testing"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/otelstock"
)

// The units a reconcile pass ended at Redis (observe.Correction.Ended:
// holds whose orders the database had returned) are exported in
// stockguard.reconcile.units, by the finding's action, with the size of
// its change: an "ended" finding (Delta 0, Ended 3) counts 3 units, a
// correction of -1 that also ended 2 units counts 3.
func TestEndedUnitsAreExported(t *testing.T) {
	t.Parallel()
	h := newHarness(t, otelstock.Config{})
	h.a.Observer().Correction(observe.Correction{SKU: "a", Action: "ended", Delta: 0, Ended: 3})
	h.a.Observer().Correction(observe.Correction{SKU: "b", Action: "corrected", Delta: -1, Ended: 2})
	ms := h.collect(t)
	u := metric(t, ms, "stockguard.reconcile.units", "{unit}")
	if n := sum(t, u, otelstock.KeyAction.String("ended")); n != 3 {
		t.Errorf("stockguard.reconcile.units{action=ended}: %d, want the 3 units the pass ended", n)
	}
	if n := sum(t, u, otelstock.KeyAction.String("corrected")); n != 3 {
		t.Errorf("stockguard.reconcile.units{action=corrected}: %d, want 3 (a change of 1 and 2 units ended)", n)
	}
}
