package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// recordState reads one order's state at the record, past any fault.
func (f *fixture) recordState(id string) stock.State {
	f.t.Helper()
	infos, err := f.record.Manager.(stock.OrderReader).Orders(f.t.Context(), []string{id})
	if err != nil || len(infos) != 1 {
		f.t.Fatalf("record Orders(%s) = %v, %v", id, infos, err)
	}
	return infos[0].State
}

// A buyer pays an order the gate lost (a flush) after its gate deadline,
// while the follow-up is between its second read of the record and its
// revert. Confirm's answer and the record must agree: a Confirm that
// returned nil is a sale, never refunded.
func TestConfirmRacingTheFollowUpIsNotRefunded(t *testing.T) {
	f := heldOrder(t)
	ctx := t.Context()
	f.loseGateData(7, "a")
	f.clock.Advance(61 * time.Second) // past the gate deadline, before the record's
	var confirmErr error
	fired := false
	f.record.SetBefore(func(c stocktest.Call) {
		if c.Method == "Revert" && !fired {
			fired = true
			confirmErr = f.m.Confirm(ctx, "o1")
		}
	})
	_, _ = f.m.ReclaimExpired(ctx, 10)
	f.record.SetBefore(nil)
	if !fired {
		t.Fatal("the follow-up never reverted the copy")
	}
	st := f.recordState("o1")
	switch {
	case confirmErr == nil && st != stock.StateConfirmed:
		t.Fatalf("Confirm returned nil but the record's order is %v: a paid sale was refunded", st)
	case confirmErr != nil && st.Takes():
		t.Fatalf("Confirm returned %v but the record's order is %v", confirmErr, st)
	case confirmErr != nil && !errors.Is(confirmErr, stock.ErrHoldExpired):
		t.Fatalf("Confirm after the gate deadline: %v, want ErrHoldExpired", confirmErr)
	}
}
