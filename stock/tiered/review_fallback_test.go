package tiered_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// These tests fail on purpose: each shows a defect of the flow at its
// record alone (Manager.Fallback) or of the flow's answers for an order
// taken there. They are not fixed yet.

// reviewFlow is a flow over two memstocks on one clock that keeps the
// drift reports it makes.
type reviewFlow struct {
	clock  *stocktest.Clock
	gate   *memstock.Store
	record *memstock.Store
	flow   *tiered.Manager
	drifts []tiered.Drift
}

func newReviewFlow(t *testing.T, cfg tiered.Config) *reviewFlow {
	t.Helper()
	f := &reviewFlow{clock: stocktest.NewClock(stocktest.Epoch)}
	f.gate, f.record = memstock.New(f.clock), memstock.New(f.clock)
	cfg.Clock = f.clock
	cfg.OnDrift = func(d tiered.Drift) { f.drifts = append(f.drifts, d) }
	f.flow = tiered.New(f.gate, f.record, cfg)
	return f
}

func reviewOrder(id string) stock.Order {
	return stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}}
}

func (f *reviewFlow) available(t *testing.T, m stock.Manager) int64 {
	t.Helper()
	n, err := m.Available(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// namesA reports whether some drift report names SKU "a".
func namesA(ds []tiered.Drift) bool {
	return slices.ContainsFunc(ds, func(d tiered.Drift) bool { return slices.Contains(d.SKUs, "a") })
}

// An order taken at the record alone, whose buyer comes back after its
// gate deadline (to pay, or to repeat the Deduct), is refused with
// stock.ErrHoldExpired and its record copy is returned there and then: the
// units come back at the record alone, which the gate never had taken
// (reconciliation brought the gate down when the order was reported).
// Nothing reports it: no Drift names the SKU, so package stockguard's Run
// does not repair it and the gate sells fewer units than the record has
// until the next full pass (a minute by default).
//
// Broken promise: the package doc ("Every unit it moves at the record
// alone (an order taken or returned, ...) is reported to Config.OnDrift
// with its SKUs") and Fallback's doc ("So does every other call that
// moves units at the record alone"); the undersell after an outage is what
// commit b27ed24 set out to end. The flow's own Confirm of such an order
// (the gate back, the order unknown to it) returns the copy the same way
// without a report, while its follow-up reports the very same return.
func TestReviewUnitsReturnedByALateCallAtTheRecordAloneAreReported(t *testing.T) {
	for name, late := range map[string]func(ctx context.Context, f *reviewFlow) error{
		"Fallback.Confirm": func(ctx context.Context, f *reviewFlow) error { return f.flow.Fallback().Confirm(ctx, "o1") },
		"Fallback.Deduct": func(ctx context.Context, f *reviewFlow) error {
			return f.flow.Fallback().Deduct(ctx, reviewOrder("o1"))
		},
		"Manager.Confirm": func(ctx context.Context, f *reviewFlow) error { return f.flow.Confirm(ctx, "o1") },
	} {
		t.Run(name, func(t *testing.T) {
			f := newReviewFlow(t, tiered.Config{})
			ctx := t.Context()
			if err := f.flow.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: 10 * time.Minute}); err != nil {
				t.Fatal(err)
			}
			if err := f.flow.Fallback().Deduct(ctx, reviewOrder("o1")); err != nil {
				t.Fatal(err)
			}
			if !namesA(f.drifts) {
				t.Fatalf("the order taken at the record alone was not reported: %+v", f.drifts)
			}
			f.drifts = nil
			f.clock.Advance(11 * time.Minute) // past the gate deadline, before the record's (20m)
			if err := late(ctx, f); !errors.Is(err, stock.ErrHoldExpired) {
				t.Fatalf("late call: %v, want ErrHoldExpired", err)
			}
			if n := f.available(t, f.record); n != 10 {
				t.Fatalf("record available %d after the late call, want the order's unit back (10)", n)
			}
			if !namesA(f.drifts) {
				t.Errorf("the unit returned at the record alone was not reported to OnDrift (reports: %+v): the gate is never told", f.drifts)
			}
		})
	}
}
