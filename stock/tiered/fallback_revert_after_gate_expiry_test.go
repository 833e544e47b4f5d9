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

// Manager.Revert: "So a Confirm, a repeat Deduct and Orders answer a
// reverted order stock.ErrOrderClosed, and an expired one
// stock.ErrHoldExpired, after the gate has forgotten it too." An answer
// once given does not change. Here the gate's reclaimer (on the gate's
// node) expired the hold at its gate deadline while this node could not
// reach the gate, and the fallback then reverted the order at the record
// before the record copy's own (later) deadline. Confirm's answer and
// Orders' state must be the same before and after the gate's Retention.
func TestFallbackRevertAfterGateExpiryAnswerStaysAfterRetention(t *testing.T) {
	for _, grace := range []time.Duration{0, 30 * time.Second} {
		t.Run("grace="+grace.String(), func(t *testing.T) {
			ctx := t.Context()
			clock := stocktest.NewClock(stocktest.Epoch)
			gate, step := forgetfulGate(t, clock)
			m := tiered.New(gate, memstock.New(clock), tiered.Config{Clock: clock, RecordGrace: grace})
			if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if err := m.Deduct(ctx, ord("o1", 3)); err != nil {
				t.Fatal(err)
			}
			step(time.Minute + time.Second) // past the gate deadline, before the record's
			if rs, err := gate.ReclaimExpired(ctx, 10); err != nil || len(rs) != 1 {
				t.Fatalf("gate's own reclaimer: %v, %v", rs, err)
			}
			if err := m.Fallback().Revert(ctx, "o1"); err != nil {
				t.Fatalf("Fallback.Revert: %v", err)
			}
			before := m.Confirm(ctx, "o1")
			in, err := m.Orders(ctx, []string{"o1"})
			if err != nil {
				t.Fatal(err)
			}
			stBefore := in[0].State
			step(redisstock.MinRetention + time.Hour)
			if _, err := m.ReclaimExpired(ctx, 10); err != nil {
				t.Logf("ReclaimExpired: %v", err)
			}
			g, _ := gate.Orders(ctx, []string{"o1"})
			after := m.Confirm(ctx, "o1")
			in, err = m.Orders(ctx, []string{"o1"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("before the Retention: Confirm %v, Orders %s; after (gate reads %s): Confirm %v, Orders %s", before, stBefore, g[0].State, after, in[0].State)
			same := (before == nil) == (after == nil)
			for _, e := range []error{stock.ErrHoldExpired, stock.ErrOrderClosed, stock.ErrOrderConfirmed, stock.ErrUnknownOrder} {
				if errors.Is(before, e) != errors.Is(after, e) {
					same = false
				}
			}
			if !same {
				t.Errorf("Confirm answered %v, then %v after the gate's Retention: an answer changed", before, after)
			}
			if in[0].State != stBefore {
				t.Errorf("Orders said %s, then %s after the gate's Retention", stBefore, in[0].State)
			}
		})
	}
}
