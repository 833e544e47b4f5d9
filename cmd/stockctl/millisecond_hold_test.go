package main

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// A shop on the default grace (tiered.Config.RecordGrace zero: the record
// holds twice as long as the gate) lists a SKU with a hold time that is
// not a whole number of milliseconds (an hour split seven ways; Listing's
// Validate takes any hold from 1ms). Both tiers keep whole milliseconds,
// so the gate keeps 514285ms and the record 1028571ms: the tiers are as
// the shop's flow wrote them, and --record-grace (0) is the shop's. The
// CHANGELOG promises the refusal only "when a SKU on both tiers has hold
// times that do not map to each other with the grace given"; the record's
// 1028571ms maps to the gate's 514285ms (tiered GateHold, which
// reconcile's pass uses). A dry run and a warm-up must run.
func TestReconcileAndWarmupTakeAShopsSubMillisecondHoldTime(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		hold := time.Hour / 7
		if err := s.flow.PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: hold}); err != nil {
			t.Fatal(err)
		}
		if g, rec := s.levels("phone"); g.HoldTTL != 514285*time.Millisecond || rec.HoldTTL != 1028571*time.Millisecond {
			t.Fatalf("set-up: gate hold %v, record hold %v; want 8m34.285s, 17m8.571s", g.HoldTTL, rec.HoldTTL)
		}
		s.run("--record-grace", "0", "reconcile", "--dry-run").is(t, exitOK, "checked 1 SKU: 1 in agreement (dry run: nothing changed)\n")
		s.run("--record-grace", "0", "warmup", "--dry-run", "phone").exits(t, exitOK)
	})
}
