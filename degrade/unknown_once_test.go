package degrade_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
)

// deductApplied applies Deduct and reports an unknown outcome, as a
// primary does whose reply was lost after the write (or that timed out
// waiting for it), and counts the calls.
type deductApplied struct {
	stock.Manager
	calls *atomic.Int64
}

func (m deductApplied) Deduct(ctx context.Context, o stock.Order) error {
	m.calls.Add(1)
	if err := m.Manager.Deduct(ctx, o); err != nil {
		return err
	}
	return fmt.Errorf("lost reply: %w", stock.ErrUnknownOutcome)
}

// An order whose outcome on the primary is unknown is answered at once:
// the call does not send it to the primary a second time, which would
// wait out the same fault again (a paused Redis's timeout, a locked row's
// lock waits). The retry with the same order goes to the primary, which
// takes nothing twice.
func TestUnknownOutcomeIsAnsweredAfterOneAttempt(t *testing.T) {
	f := newFixture(t, degrade.Config{})
	f.sale("a", 10)
	var calls atomic.Int64
	d := mustNew(t, deductApplied{f.primary, &calls}, f.fallback, degrade.Config{Clock: f.clock})
	t.Cleanup(d.Close)
	o := stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	err := d.Deduct(t.Context(), o)
	if !errors.Is(err, stock.ErrUnknownOutcome) || errors.Is(err, stock.ErrContention) {
		t.Errorf("deduct whose reply the primary lost: %v, want ErrUnknownOutcome", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the primary was asked %d times within one call, want 1", n)
	}
	if err := d.Deduct(t.Context(), o); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Errorf("retry: %v, want the primary's answer (ErrUnknownOutcome from this fake)", err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the retry asked the primary %d times in all, want 2", n)
	}
	if got := f.held(f.primary, "a"); got != 1 {
		t.Errorf("held at the primary: %d, want 1 (taken once)", got)
	}
	if got := f.held(f.fallback, "a"); got != 0 {
		t.Errorf("held at the fallback: %d, want 0", got)
	}
}
