package tiered_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// admitter is a Recorder that refuses new orders while busy is set.
type admitter struct {
	busy     atomic.Bool
	recorded atomic.Int64
}

func (a *admitter) Record(context.Context, stock.Order) error { a.recorded.Add(1); return nil }

func (a *admitter) Admit(context.Context, stock.Order) error {
	if a.busy.Load() {
		return stock.ErrContention
	}
	return nil
}

// A Recorder that is an Admitter is asked before the gate: its refusal is
// the caller's answer and nothing is held; Settle does not ask it.
func TestAdmitterRefusesBeforeTheGate(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	f.sale("a", 10, 10, 0, 0)
	a := &admitter{}
	m := tiered.New(f.gate, f.record, tiered.Config{Clock: f.clock, Recorder: a})
	a.busy.Store(true)
	if _, err := m.Place(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrContention) || !errors.Is(err, tiered.ErrNotAdmitted) {
		t.Fatalf("Place while the recorder refuses: %v, want ErrNotAdmitted wrapping ErrContention", err)
	}
	f.want(f.gate, "gate", "a", 10, 0, 0)
	if n := a.recorded.Load(); n != 0 {
		t.Fatalf("%d orders handed off while refused, want 0", n)
	}
	// Settle records an order the gate holds whatever Admit says.
	a.busy.Store(false)
	if p, err := m.Place(ctx, ord("o2", 2)); err != nil || p != tiered.Pending {
		t.Fatalf("Place once admitted: %v, %v", p, err)
	}
	a.busy.Store(true)
	if err := m.Settle(ctx, ord("o2", 2)); err != nil {
		t.Fatalf("Settle while refusing new orders: %v", err)
	}
	f.want(f.gate, "gate", "a", 8, 2, 0)
	f.want(f.record, "record", "a", 8, 2, 0)
}
