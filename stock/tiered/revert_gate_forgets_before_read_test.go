package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// Manager.Revert: "A held order reverted past its deadline ends expired,
// as on every backend ... So a Confirm, a repeat Deduct and Orders answer
// ... an expired one stock.ErrHoldExpired, after the gate has forgotten
// it too." Here the Revert comes past the deadline; the gate ends its
// hold expired and, with a short Retention (redisstock.MinRetention),
// has forgotten it by the time the call reads it once more.
func TestRevertPastDeadlineEndsExpiredWhenTheGateForgetsBeforeTheRead(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	rs, step := forgetfulGate(t, clock)
	gate := stocktest.NewFaulty(rs)
	m := tiered.New(gate, memstock.New(clock), tiered.Config{Clock: clock, RecordGrace: 30 * time.Second})
	if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	step(time.Minute + 5*time.Second) // past the gate deadline, before the record's
	reverted, fired := false, false
	gate.SetBefore(func(c stocktest.Call) {
		switch {
		case c.Method == "Revert" && c.OrderID == "o1":
			reverted = true
		case c.Method == "Orders" && reverted && !fired:
			fired = true
			step(2 * time.Second) // the gate's Retention passes
		}
	})
	if err := m.Revert(ctx, "o1"); err != nil {
		t.Fatalf("Revert: %v", err)
	}
	gate.SetBefore(nil)
	if !fired {
		t.Fatal("the gate was not read after its revert")
	}
	in, err := m.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Confirm(ctx, "o1")
	t.Logf("Orders %s, Confirm %v", in[0].State, err)
	if in[0].State != stock.StateExpired {
		t.Errorf("Orders after a Revert past the deadline: %s, want expired", in[0].State)
	}
	if !errors.Is(err, stock.ErrHoldExpired) {
		t.Errorf("Confirm after a Revert past the deadline: %v, want %v", err, stock.ErrHoldExpired)
	}
}
