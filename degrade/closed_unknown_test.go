package degrade_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// unsure is a primary whose Confirm was sent and its reply lost: the
// outcome is unknown, as tiered answers when its gate step may have
// applied.
type unsure struct{ stock.Manager }

func (unsure) Confirm(context.Context, string) error {
	return fmt.Errorf("confirm at the gate: reply lost: %w", stock.ErrUnknownOutcome)
}

// An order the fallback reads as closed makes degrade ask the primary why;
// a primary whose answer is unknown (it may have applied the call) must
// not be hidden behind the fallback's final-looking ErrOrderClosed.
func TestConfirmClosedAtFallbackKeepsThePrimarysUnknownOutcome(t *testing.T) {
	clock := stocktest.NewClock(stocktest.Epoch)
	fallback := memstock.New(clock)
	d := mustNew(t, unsure{memstock.New(clock)}, fallback, degrade.Config{Clock: clock, FallbackLimit: rate.Inf})
	defer d.Close()
	ctx := context.Background()
	if err := fallback.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 5}); err != nil {
		t.Fatal(err)
	}
	d.SetMode(degrade.ForceFallback)
	o := stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	if err := d.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := d.Revert(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	d.SetMode(degrade.Auto)
	err := d.Confirm(ctx, "o1")
	if !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Confirm: %v; want the primary's unknown outcome, not the fallback's answer", err)
	}
}
