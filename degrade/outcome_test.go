package degrade_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
)

// confirmApplied applies Confirm and reports an unknown outcome, as a
// primary does whose reply was lost after the write.
type confirmApplied struct{ stock.Manager }

func (m confirmApplied) Confirm(ctx context.Context, id string) error {
	if err := m.Manager.Confirm(ctx, id); err != nil {
		return err
	}
	return fmt.Errorf("lost reply: %w", stock.ErrUnknownOutcome)
}

// canceledConfirm answers Confirm with a plain context error, as a store
// does whose caller's context ended before anything was sent.
type canceledConfirm struct{ stock.Manager }

func (m canceledConfirm) Confirm(context.Context, string) error { return context.DeadlineExceeded }

// A Confirm that may have applied at the primary stays an unknown outcome
// when the fallback, asked next, fails before sending anything: the plain
// error of the second tier must not hide that the first may have written.
func TestUnknownAtPrimaryThenPlainFallbackErrorStaysUnknown(t *testing.T) {
	f := newFixture(t, degrade.Config{})
	f.sale("a", 10)
	if err := f.deduct("o1", "a", 1); err != nil {
		t.Fatal(err)
	}
	d := mustNew(t, confirmApplied{f.primary}, canceledConfirm{f.fallback}, degrade.Config{Clock: f.clock})
	t.Cleanup(d.Close)
	err := d.Confirm(t.Context(), "o1")
	if !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Confirm applied at the primary, reply lost, fallback failed: %v; want ErrUnknownOutcome", err)
	}
	if lv, err := f.primary.Levels(t.Context(), "a"); err != nil || lv.Sold != 1 {
		t.Fatalf("primary levels %+v, %v; want 1 sold (the confirm was applied)", lv, err)
	}
}
