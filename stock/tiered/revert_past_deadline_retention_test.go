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

// As TestConfirmOfAnOrderRevertedPastItsDeadlineStaysFinalOnceTheGateForgot,
// with a Redis gate that forgets the ended order after its Retention, as
// it is meant to: no data loss needed.
func TestConfirmOfAnOrderRevertedPastItsDeadlineStaysFinalAfterTheGateRetention(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	gate, step := forgetfulGate(t, clock)
	m := tiered.New(gate, memstock.New(clock), tiered.Config{Clock: clock})
	if err := m.PutOnSale(ctx, pastDeadlineListing); err != nil {
		t.Fatal(err)
	}
	o := stock.Order{ID: "o0", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	if err := m.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	step(70 * time.Second) // past the deadline, not reclaimed
	if err := m.Revert(ctx, "o0"); err != nil {
		t.Fatalf("Revert: %v", err)
	}
	if err := m.Confirm(ctx, "o0"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("Confirm: %v, want %v", err, stock.ErrHoldExpired)
	}
	d := redisstock.MinRetention + time.Hour
	step(d)
	if _, err := m.ReclaimExpired(ctx, 10); err != nil {
		t.Logf("ReclaimExpired: %v", err)
	}
	g, _ := gate.Orders(ctx, []string{"o0"})
	if err := m.Confirm(ctx, "o0"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Errorf("Confirm after the gate's Retention (gate reads %v): %v, want %v (as answered before)", g[0].State, err, stock.ErrHoldExpired)
	}
}
