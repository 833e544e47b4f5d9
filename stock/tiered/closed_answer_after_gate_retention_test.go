package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// An order a caller reverted well before its deadline is closed: Confirm
// answers stock.ErrOrderClosed, and keeps that answer once the Redis gate
// has forgotten the ended order after its Retention (an answer once given
// does not change).
func TestClosedAnswerStaysFinalAfterTheGateRetention(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	gate, step := forgetfulGate(t, clock)
	m := tiered.New(gate, memstock.New(clock), tiered.Config{Clock: clock})
	if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	if err := m.Revert(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	if err := m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("Confirm after Revert: %v, want %v", err, stock.ErrOrderClosed)
	}
	d := redisstock.MinRetention + time.Hour
	step(d)
	if _, err := m.ReclaimExpired(ctx, 10); err != nil {
		t.Logf("ReclaimExpired: %v", err)
	}
	g, _ := gate.Orders(ctx, []string{"o1"})
	if err := m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrOrderClosed) {
		t.Errorf("Confirm after the gate's Retention (gate reads %v): %v, want %v (as answered before)", g[0].State, err, stock.ErrOrderClosed)
	}
	if err := m.Deduct(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrOrderClosed) {
		t.Errorf("repeat Deduct after the gate's Retention: %v, want %v", err, stock.ErrOrderClosed)
	}
	in, err := m.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	if in[0].State != stock.StateReverted {
		t.Errorf("Orders after the gate's Retention: %s, want reverted", in[0].State)
	}
}
