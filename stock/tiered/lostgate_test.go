package tiered_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// lostGate is a flow whose gate lost its data after o1 (3 units of "a",
// out of 10) was recorded, and was rebuilt from the record (7 available,
// o1 unknown to it), as reconciliation rebuilds a flushed Redis. record
// is the record's store behind its fault wrapper.
type lostGate struct {
	clock  *stocktest.Clock
	gate   *memstock.Store
	record *stocktest.Faulty
	flow   *tiered.Manager
	drifts []tiered.Drift
}

// newLostGate records o1 through a flow, confirmed if confirm is set,
// then puts a new, rebuilt gate in front of the record.
func newLostGate(t *testing.T, confirm bool) *lostGate {
	t.Helper()
	ctx := t.Context()
	l := &lostGate{clock: stocktest.NewClock(stocktest.Epoch)}
	l.record = stocktest.NewFaulty(memstock.New(l.clock))
	cfg := tiered.Config{Clock: l.clock, OnDrift: func(d tiered.Drift) { l.drifts = append(l.drifts, d) }}
	before := tiered.New(memstock.New(l.clock), l.record, cfg)
	listing := stock.Listing{SKU: "a", Units: 10, HoldTTL: 10 * time.Minute}
	if err := before.PutOnSale(ctx, listing); err != nil {
		t.Fatal(err)
	}
	if err := before.Deduct(ctx, lostOrder()); err != nil {
		t.Fatal(err)
	}
	if confirm {
		if err := before.Confirm(ctx, "o1"); err != nil {
			t.Fatal(err)
		}
	}
	l.gate = memstock.New(l.clock)
	listing.Units = 7 // the record's available count: o1's units are taken
	if err := l.gate.PutOnSale(ctx, listing); err != nil {
		t.Fatal(err)
	}
	l.flow = tiered.New(l.gate, l.record, cfg)
	l.drifts = nil
	return l
}

func lostOrder() stock.Order {
	return stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 3}}}
}

// available returns "a"'s available units at the gate and at the record.
func (l *lostGate) available(t *testing.T) (gate, record int64) {
	t.Helper()
	g, err := l.gate.Available(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.record.Manager.Available(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	return g, r
}

// reported reports whether a drift report names "a".
func (l *lostGate) reported() bool {
	return slices.ContainsFunc(l.drifts, func(d tiered.Drift) bool { return slices.Contains(d.SKUs, "a") })
}

// Units that come back at the record alone, for an order the gate does
// not know, are reported with their SKUs whichever call returns them: the
// flow's Revert and RevertItems as its Fallback's. A repeat of the call
// returns nothing more.
func TestReturnOfAnOrderTheGateLostIsReported(t *testing.T) {
	refund := stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	for _, c := range []struct {
		name    string
		confirm bool
		call    func(l *lostGate, t *testing.T) error
		record  int64
	}{
		{"Revert of a held order", false, func(l *lostGate, t *testing.T) error { return l.flow.Revert(t.Context(), "o1") }, 10},
		{"Revert of a sale", true, func(l *lostGate, t *testing.T) error { return l.flow.Revert(t.Context(), "o1") }, 10},
		{"RevertItems of a held order", false, func(l *lostGate, t *testing.T) error { return l.flow.RevertItems(t.Context(), refund) }, 8},
		{"RevertItems of a sale", true, func(l *lostGate, t *testing.T) error { return l.flow.RevertItems(t.Context(), refund) }, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLostGate(t, c.confirm)
			for i := range 2 {
				if err := c.call(l, t); err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if g, r := l.available(t); g != 7 || r != c.record {
					t.Fatalf("after call %d: gate %d, record %d available, want 7 and %d", i+1, g, r, c.record)
				}
				if i == 0 && !l.reported() {
					t.Fatalf("units returned at the record alone, no drift names the SKU: %+v", l.drifts)
				}
			}
		})
	}
}

// A Revert of an order neither tier knows, through a gate that lost its
// data, changes nothing and reports nothing; through a gate that cannot
// answer (stock.ErrUnavailable), the gate's answer is given.
func TestRevertOfAnOrderNeitherTierKnows(t *testing.T) {
	l := newLostGate(t, false)
	if err := l.flow.Revert(t.Context(), "nope"); !errors.Is(err, stock.ErrUnknownOrder) {
		t.Fatalf("Revert: %v, want ErrUnknownOrder", err)
	}
	gate := stocktest.NewFaulty(l.gate)
	gate.SetFault(stocktest.Unavailable)
	flow := tiered.New(gate, l.record, tiered.Config{Clock: l.clock, OnDrift: func(d tiered.Drift) { l.drifts = append(l.drifts, d) }})
	if err := flow.Revert(t.Context(), "nope"); !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("Revert through an unavailable gate: %v, want ErrUnavailable", err)
	}
	if len(l.drifts) != 0 {
		t.Fatalf("nothing moved, reported %+v", l.drifts)
	}
}
