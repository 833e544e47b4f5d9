package main

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A shop whose flow sets tiered.Config.RecordGrace 1m lists "phone" for
// 15m (16m at the record). An operator relists it with 'stockctl
// put-on-sale phone 20 --hold 15m' and forgets --record-grace: both tiers'
// hold times already show the flag is not the shop's grace, the check
// reconcile and warmup now make before writing (CHANGELOG: "refuse the
// run (exit 2, naming --record-grace, nothing written) when a SKU on both
// tiers has hold times that do not map to each other with the grace
// given"). put-on-sale writes the record's hold time from the same flag
// (its help: "the record a longer one (--record-grace)"), so it must
// refuse the same contradiction, not rewrite the record's hold to 30m: after
// it, the shop's own grace no longer maps the tiers ('stockctl
// --record-grace 1m reconcile' is refused) and the shop's flow, with
// RecordGrace 1m, keeps the record's copies of held orders 29m.
func TestPutOnSaleRefusesAGraceTheTiersContradict(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		flow := tiered.New(s.gate, s.record, tiered.Config{Clock: s.clock, RecordGrace: time.Minute})
		if err := flow.PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 15 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		s.run("reconcile", "--dry-run").exits(t, exitUsage, "--record-grace") // the same flags: refused

		r := s.run("put-on-sale", "phone", "20", "--hold", "15m") // the operator forgot --record-grace 1m
		_, rec := s.levels("phone")
		if rec.HoldTTL != 16*time.Minute {
			t.Errorf("after 'stockctl put-on-sale phone 20 --hold 15m' (exit %d) the record's hold time is %v, want the shop's 16m kept (the run refused, naming --record-grace)\nstderr:\n%s",
				r.code, rec.HoldTTL, r.err)
		}
		r.exits(t, exitUsage, "--record-grace")
		s.run("--record-grace", "1m", "reconcile", "--dry-run").is(t, exitOK, "checked 1 SKU: 1 in agreement (dry run: nothing changed)\n")
	})
}
