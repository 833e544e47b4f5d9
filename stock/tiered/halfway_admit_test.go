package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// lostRequestGate answers a Deduct with an unknown outcome without
// sending it to the gate while drop is set: the request was lost on its
// way (a client timeout before the server read it), as the outcome rule
// allows, and the gate never held the order.
type lostRequestGate struct {
	*stocktest.Faulty
	drop atomic.Bool
}

func (g *lostRequestGate) Deduct(ctx context.Context, o stock.Order) error {
	if g.drop.Load() {
		return fmt.Errorf("%w: %w", stock.ErrUnknownOutcome, &net.OpError{Op: "write", Net: "tcp", Err: stocktest.ErrInjected})
	}
	return g.Faulty.Deduct(ctx, o)
}

// An order whose gate call was lost (unknown outcome, nothing held) is a
// new order when it is sent again: the gate has never held it. While the
// hand-off lags, the Recorder's Admit turns new orders away (nothing
// held, retry later), so that no hold is sold that would expire before
// the record takes it, and so it turns this retry away: the Manager's
// memory of half-way orders lets a retry past only once the gate says it
// has the order.
func TestRetryOfAnOrderTheGateNeverHeldIsNotAdmittedWhileTheHandoffLags(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	f.sale("a", 10, 10, 0, 0)
	gate := &lostRequestGate{Faulty: f.gate}
	a := &admitter{}
	m := tiered.New(gate, f.record, tiered.Config{Clock: f.clock, Recorder: a})

	gate.drop.Store(true)
	if _, err := m.Place(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Place with its gate request lost: %v, want stock.ErrUnknownOutcome", err)
	}
	gate.drop.Store(false)
	f.want(f.gate, "gate after the lost request", "a", 10, 0, 0)

	a.busy.Store(true) // the hand-off lags: new orders are turned away
	_, err := m.Place(ctx, ord("o1", 3))
	if !errors.Is(err, tiered.ErrNotAdmitted) {
		t.Errorf("retry of an order the gate never held, while the hand-off lags: %v, want ErrNotAdmitted", err)
	}
	if n := a.recorded.Load(); n != 0 {
		t.Errorf("%d orders handed off while Admit refuses new orders, want 0", n)
	}
	f.want(f.gate, "gate", "a", 10, 0, 0)
}

// Same, with the retry refused for good by the gate (sold out: the lost
// request never took stock): the order ends, refused, and its ID is no
// longer half-way: a later attempt of that ID is a new order to Admit.
func TestRefusedRetryOfALostRequestIsForgotten(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	f.sale("a", 2, 2, 0, 0)
	gate := &lostRequestGate{Faulty: f.gate}
	a := &admitter{}
	m := tiered.New(gate, f.record, tiered.Config{Clock: f.clock, Recorder: a})

	gate.drop.Store(true)
	if _, err := m.Place(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Place with its gate request lost: %v, want stock.ErrUnknownOutcome", err)
	}
	gate.drop.Store(false)
	if _, err := m.Place(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("retry of 3 units with 2 on sale: %v, want stock.ErrSoldOut", err)
	}
	// More stock comes; the hand-off lags.
	if err := f.gate.Restock(ctx, stock.Restock{OpID: "r1", SKU: "a", Units: 8}); err != nil {
		t.Fatal(err)
	}
	if err := f.record.Restock(ctx, stock.Restock{OpID: "r1", SKU: "a", Units: 8}); err != nil {
		t.Fatal(err)
	}
	a.busy.Store(true)
	if _, err := m.Place(ctx, ord("o1", 3)); !errors.Is(err, tiered.ErrNotAdmitted) {
		t.Errorf("an order refused for good, placed again while the hand-off lags: %v, want ErrNotAdmitted", err)
	}
	f.want(f.gate, "gate", "a", 10, 0, 0)
}
