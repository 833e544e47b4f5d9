package main

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A shop whose flow sets tiered.Config.RecordGrace 1m sells "lamp" (15m at
// the gate, 16m at the record) and, while Redis was down, put "phone" on
// sale for 15m through its breaker, at the record alone (16m there, no
// gate state). 'stockctl inspect phone' says to run 'stockctl reconcile
// --apply phone', which the operator does without --record-grace. The
// CHANGELOG says runs without the shop's --record-grace "rewrote the
// gate's hold times from the record's with the wrong grace" and that
// reconcile and warmup now refuse them; the shop's grace shows on "lamp"
// (and 'stockctl reconcile --apply', naming no SKU, is refused for it), yet
// the named run rebuilds "phone" at the gate with 8m, exit 0, and the shop
// then sells it with 8-minute holds.
func TestReconcileRebuildKeepsTheShopsHoldTimeWithoutItsRecordGrace(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		flow := tiered.New(s.gate, s.record, tiered.Config{Clock: s.clock, RecordGrace: time.Minute})
		if err := flow.PutOnSale(s.ctx, stock.Listing{SKU: "lamp", Units: 5, HoldTTL: 15 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := flow.Fallback().PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 15 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		s.run("reconcile", "--apply").exits(t, exitUsage, "--record-grace") // the unnamed run is refused

		r := s.run("reconcile", "--apply", "phone")
		if g, _ := s.levels("phone"); g.HoldTTL != 15*time.Minute {
			t.Errorf("after 'stockctl reconcile --apply phone' (exit %d) the gate's hold time of phone is %v, want the listing's 15m (or the run refused, naming --record-grace)\nstdout:\n%s\nstderr:\n%s",
				r.code, g.HoldTTL, r.out, r.err)
		}
	})
}
