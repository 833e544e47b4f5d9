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
// (and 'stockctl reconcile --apply', naming no SKU, is refused for it). The
// named run must not rebuild "phone" at the gate with 8m (it did, exit 0,
// and the shop then sold it with 8-minute holds): "phone" is on one tier
// only and shows no grace, so the default is checked on the shop's other
// SKUs, and "lamp" contradicts it: the run is refused, naming
// --record-grace and "lamp", nothing written. With the shop's grace given
// the rebuild gives the listing's 15m.
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
		r.exits(t, exitUsage, "--record-grace", `"lamp"`, `"phone" is not on both tiers`, "nothing was written")
		if atGate, _ := s.onTiers("phone"); atGate {
			g, _ := s.levels("phone")
			t.Fatalf("after the refused run the gate has phone, hold time %v; want nothing written", g.HoldTTL)
		}
		s.run("warmup", "phone").exits(t, exitUsage, "--record-grace", `"lamp"`)

		s.run("--record-grace", "1m", "reconcile", "--apply", "phone").exits(t, exitOK)
		if g, _ := s.levels("phone"); g.HoldTTL != 15*time.Minute {
			t.Errorf("after 'stockctl --record-grace 1m reconcile --apply phone' the gate's hold time of phone is %v, want the listing's 15m", g.HoldTTL)
		}
	})
}

// The same shop puts a new SKU on sale with stockctl and forgets
// --record-grace: the new SKU is on no tier and shows no grace, so the
// default is checked on the shop's other SKUs, which contradict it; the
// run is refused, naming --record-grace, nothing written (the record
// would otherwise hold the new listing 30m, not the shop's 16m).
func TestPutOnSaleOfANewSKUChecksTheDefaultGraceOnTheShopsOtherSKUs(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		flow := tiered.New(s.gate, s.record, tiered.Config{Clock: s.clock, RecordGrace: time.Minute})
		if err := flow.PutOnSale(s.ctx, stock.Listing{SKU: "lamp", Units: 5, HoldTTL: 15 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		s.run("put-on-sale", "tv", "3", "--hold", "15m").exits(t, exitUsage, "--record-grace", `"lamp"`, "nothing was written")
		if atGate, atRecord := s.onTiers("tv"); atGate || atRecord {
			t.Fatalf("after the refused run: tv on the gate %v, on the record %v; want on neither", atGate, atRecord)
		}
		s.run("--record-grace", "1m", "put-on-sale", "tv", "3", "--hold", "15m").exits(t, exitOK)
		if g, rec := s.levels("tv"); g.HoldTTL != 15*time.Minute || rec.HoldTTL != 16*time.Minute {
			t.Fatalf("tv: gate hold %v, record hold %v; want 15m, 16m", g.HoldTTL, rec.HoldTTL)
		}
	})
}

// onTiers reports whether each tier has the SKU.
func (s *shop) onTiers(sku string) (gate, record bool) {
	s.t.Helper()
	g, err := s.gate.Inspect(s.ctx, []string{sku})
	if err != nil {
		s.t.Fatal(err)
	}
	r, err := s.record.Snapshot(s.ctx, []string{sku})
	if err != nil {
		s.t.Fatal(err)
	}
	return g[0].Exists, r[0].Exists
}
