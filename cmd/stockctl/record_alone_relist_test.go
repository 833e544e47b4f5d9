package main

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// A shop on the default grace lists "phone" for 15m; while Redis is down
// its breaker relists it for 20m through the flow's Fallback, at the record
// alone (tiered.Fallback.PutOnSale: "writes the record's listing
// (RecordListing) ... a gate that takes traffic again must first be
// brought into agreement (package reconcile)"). The record holds 40m, the
// gate still 15m. Package reconcile names this very case as what its pass
// repairs (reconcile/batch.go settingsDiffer: "a listing changed at the
// record alone (while a breaker kept traffic off the gate)"), and
// 'stockctl reconcile' is that pass (its help: "--apply makes a real pass
// ... Run it while the shop sells"). The operator gives the shop's grace
// explicitly (--record-grace 0), so no flag is wrong: 'stockctl reconcile
// --dry-run' must report the SKU (exit 1, not a usage error) and '--apply'
// must give the gate the new 20m.
func TestReconcileRepairsAListingChangedAtTheRecordAlone(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 15*time.Minute)
		if err := s.flow.Fallback().PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 20 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		if g, rec := s.levels("phone"); g.HoldTTL != 15*time.Minute || rec.HoldTTL != 40*time.Minute {
			t.Fatalf("set-up: gate hold %v, record hold %v; want 15m, 40m", g.HoldTTL, rec.HoldTTL)
		}
		s.run("--record-grace", "0", "reconcile", "--dry-run").exits(t, exitUnresolved)
		r := s.run("--record-grace", "0", "reconcile", "--apply")
		if g, _ := s.levels("phone"); g.HoldTTL != 20*time.Minute {
			t.Errorf("after 'stockctl reconcile --apply' (exit %d) the gate's hold time is %v, want the relisted 20m\nstdout:\n%s\nstderr:\n%s",
				r.code, g.HoldTTL, r.out, r.err)
		}
		r.exits(t, exitOK)
	})
}

// The same SKU, through 'stockctl inspect': its note names the way out,
// "'stockctl warmup' sets the gate's from the record". With the shop's own
// --record-grace given, 'stockctl warmup phone' (no live holds) must do
// what inspect says it does: give the gate the record's 40m less the
// grace, 20m (warmup's help: "the gate's hold time is the record's less
// --record-grace, as the shop's flow sets them").
func TestWarmupDoesWhatInspectAdvisesForAListingChangedAtTheRecordAlone(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 15*time.Minute)
		if err := s.flow.Fallback().PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 20 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		s.run("--record-grace", "0", "inspect", "phone").exits(t, exitOK, "'stockctl warmup' sets the gate's from the record")
		r := s.run("--record-grace", "0", "warmup", "phone")
		if g, _ := s.levels("phone"); g.HoldTTL != 20*time.Minute {
			t.Errorf("after 'stockctl warmup phone' (exit %d) the gate's hold time is %v, want 20m\nstdout:\n%s\nstderr:\n%s",
				r.code, g.HoldTTL, r.out, r.err)
		}
		r.exits(t, exitOK)
	})
}

// A grace given in the environment (STOCKCTL_RECORD_GRACE) is given as
// much as the flag: the same relist at the record alone is repaired with
// it. With no grace given at all, the default's contradiction with the
// tiers is refused before anything is written, naming --record-grace.
func TestReconcileTakesTheGraceFromTheEnvironmentAsGiven(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 15*time.Minute)
		if err := s.flow.Fallback().PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 20 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		s.run("reconcile", "--apply").exits(t, exitUsage, "no --record-grace given", `"phone"`, "nothing was written")
		if g, _ := s.levels("phone"); g.HoldTTL != 15*time.Minute {
			t.Fatalf("after a refused run the gate's hold time is %v, want 15m", g.HoldTTL)
		}
		s.env = map[string]string{"STOCKCTL_RECORD_GRACE": "0"}
		s.run("reconcile", "--apply").exits(t, exitOK)
		if g, _ := s.levels("phone"); g.HoldTTL != 20*time.Minute {
			t.Fatalf("after 'STOCKCTL_RECORD_GRACE=0 stockctl reconcile --apply' the gate's hold time is %v, want 20m", g.HoldTTL)
		}
	})
}
