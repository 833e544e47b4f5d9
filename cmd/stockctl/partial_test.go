package main

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// holds shows the units partial reverts gave back beside what a line
// still holds, and inspect a SKU's maximum hold time where it is longer
// than the hold time.
func TestHoldsAndInspectShowReturnsAndMaxHold(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		if err := s.flow.PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 15 * time.Minute, MaxHoldTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if lv, _ := s.record.Levels(s.ctx, "phone"); lv.MaxHoldTTL != 75*time.Minute {
			t.Skip("the record does not keep MaxHoldTTL")
		}
		s.deduct(s.flow, "o-1", "alice", "phone", 3)
		s.deduct(s.flow, "o-2", "bob", "phone", 1)
		if err := s.flow.RevertItems(s.ctx, stock.Return{OpID: "r1", OrderID: "o-1", Items: []stock.Item{{SKU: "phone", Qty: 1}}}); err != nil {
			t.Fatal(err)
		}
		s.run("holds", "phone").is(t, exitOK, ""+
			"ORDER  USER   QTY             TIERS  GATE DEADLINE             RECORD DEADLINE           LEFT\n"+
			"o-1    alice  2 (1 returned)  both   2026-01-01T00:15:00.000Z  2026-01-01T00:30:00.000Z  15m0s\n"+
			"o-2    bob    1               both   2026-01-01T00:15:00.000Z  2026-01-01T00:30:00.000Z  15m0s\n"+
			"2 live holds of phone: 2 on both tiers, 0 on the gate only, 0 on the record only\n")
		s.run("inspect", "phone").is(t, exitOK, ""+
			"SKU    TIER    AVAILABLE  HELD  SOLD  HOLDS  IN FLIGHT  LIMIT  HOLD\n"+
			"phone  gate    7          3     0     2      0          none   15m0s, max 1h0m0s\n"+
			"phone  record  7          3     0     2      0          none   30m0s, max 1h15m0s\n")
	})
}
