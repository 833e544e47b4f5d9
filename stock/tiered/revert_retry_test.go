package tiered_test

import (
	"errors"
	"testing"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A Revert of an order the gate lost returns its units at the record
// alone, and reports its SKUs to Config.OnDrift. When the record's reply
// to that revert is lost (the record applied it), the caller retries as
// an unknown outcome asks, and the retry, which finds the order reverted
// at the record already, reports them: the first call could not. It
// reported only an order it found still taking units.
func TestRevertRetriedAfterALostReplyOfAnOrderTheGateLostIsReported(t *testing.T) {
	for _, confirm := range []bool{false, true} {
		name := "held"
		if confirm {
			name = "confirmed"
		}
		t.Run(name, func(t *testing.T) {
			l := newLostGate(t, confirm)
			l.record.SetFaultFor(stocktest.LostReply, stocktest.OnMethod("Revert"))
			err := l.flow.Revert(t.Context(), "o1")
			if !errors.Is(err, stock.ErrUnknownOutcome) {
				t.Fatalf("Revert with the record's reply lost: %v, want an unknown outcome", err)
			}
			l.record.SetFault(stocktest.Healthy)
			if err := l.flow.Revert(t.Context(), "o1"); err != nil { // the retry
				t.Fatalf("retry: %v", err)
			}
			g, r := l.available(t)
			if r != 10 || g != 7 {
				t.Fatalf("gate %d, record %d available; want 7 and 10", g, r)
			}
			if !l.reported() {
				t.Fatalf("the revert returned %d units at the record alone (record %d, gate %d) and no drift names the SKU: %+v",
					r-g, r, g, l.drifts)
			}
		})
	}
}
