package tiered_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// admitter is a Recorder that refuses new orders while busy is set, and
// fails its next hand-off when fail is set.
type admitter struct {
	busy, fail atomic.Bool
	recorded   atomic.Int64
}

func (a *admitter) Record(context.Context, stock.Order) error {
	if a.fail.Swap(false) {
		return errors.New("publish: i/o timeout")
	}
	a.recorded.Add(1)
	return nil
}

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

// An order whose hand-off failed is half-way (the gate holds it, the queue
// does not have it), and Place says to call again with the same order to
// finish it. Admit's refusal says nothing is held, so it does not answer
// that repeat, even while the recorder turns new orders away: the repeat
// finishes the hand-off. A new order is still turned away.
func TestRepeatOfAHalfWayOrderIsNotTurnedAway(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	f.sale("a", 10, 10, 0, 0)
	a := &admitter{}
	m := tiered.New(f.gate, f.record, tiered.Config{Clock: f.clock, Recorder: a})
	a.fail.Store(true)
	if _, err := m.Place(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Place with a failed hand-off: %v, want stock.ErrUnknownOutcome (half-way)", err)
	}
	a.busy.Store(true)
	if p, err := m.Place(ctx, ord("o1", 3)); err != nil || p != tiered.Pending {
		t.Fatalf("the repeat while new orders are turned away: %v, %v; want Pending, nil (its hand-off finished)", p, err)
	}
	if n := a.recorded.Load(); n != 1 {
		t.Fatalf("%d hand-offs, want 1", n)
	}
	f.want(f.gate, "gate", "a", 7, 3, 0)
	if _, err := m.Place(ctx, ord("o2", 1)); !errors.Is(err, tiered.ErrNotAdmitted) {
		t.Fatalf("a new order while turned away: %v, want ErrNotAdmitted", err)
	}
	f.want(f.gate, "gate", "a", 7, 3, 0)
}
