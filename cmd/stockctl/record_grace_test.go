package main

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A shop whose flow sets tiered.Config.RecordGrace (here 1m: the record
// holds 16m for a 15m listing) is reconciled by an operator who runs
// 'stockctl reconcile --apply' without --record-grace. The README: "Every
// part is usable alone too; wired by hand, each derives or refuses what it
// must agree on." The grace is such a setting: stockctl's flag must be the
// shop's. The listing's 15m is how long a buyer has to pay; a repair pass of
// tiers whose units agree (DELTA 0) must not rewrite it. Both tiers' hold
// times show the flag is not the shop's grace (inspect notes it), so the
// pass is refused, naming --record-grace, before anything is written
// (exit 2, "bad flags"); with the shop's grace it runs. It used to answer
// "corrected", exit 0, with every SKU's gate hold time GateHold(16m) = 8m,
// half what the shop sells with.
func TestReconcileApplyKeepsTheShopsHoldTimeWithoutItsRecordGrace(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		flow := tiered.New(s.gate, s.record, tiered.Config{Clock: s.clock, RecordGrace: time.Minute})
		if err := flow.PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 15 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		g, rec := s.levels("phone")
		if g.HoldTTL != 15*time.Minute || rec.HoldTTL != 16*time.Minute {
			t.Fatalf("set-up: gate hold %v, record hold %v; want 15m, 16m", g.HoldTTL, rec.HoldTTL)
		}

		r := s.run("reconcile", "--apply") // the operator forgot --record-grace 1m
		g, _ = s.levels("phone")
		if g.HoldTTL != 15*time.Minute {
			t.Fatalf("after 'stockctl reconcile --apply' (exit %d): the gate's hold time is %v, want the listing's 15m kept (or the run refused, naming --record-grace)\nstdout:\n%s\nstderr:\n%s",
				r.code, g.HoldTTL, r.out, r.err)
		}
		r.exits(t, exitUsage, "--record-grace", `"phone"`, "nothing was written")
		s.run("reconcile", "--apply", "phone").exits(t, exitUsage, "--record-grace")
		s.run("reconcile", "--dry-run").exits(t, exitUsage, "--record-grace")
		s.run("--record-grace", "1m", "reconcile", "--apply").is(t, exitOK, "checked 1 SKU: 1 in agreement\n")
		if g, _ = s.levels("phone"); g.HoldTTL != 15*time.Minute {
			t.Fatalf("after 'stockctl --record-grace 1m reconcile --apply': the gate's hold time is %v, want 15m", g.HoldTTL)
		}
	})
}

// The same for 'stockctl warmup' (its help: "the gate's hold time is the
// record's less --record-grace, as the shop's flow sets them"): run on a SKU
// both tiers list, with no live holds, where the tiers' own hold times show
// the flag is not the shop's grace, it is refused naming --record-grace,
// nothing written (it used to rewrite the gate's hold time from the shop's
// 15m to 8m, exit 0).
func TestWarmupKeepsTheShopsHoldTimeWithoutItsRecordGrace(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		flow := tiered.New(s.gate, s.record, tiered.Config{Clock: s.clock, RecordGrace: time.Minute})
		if err := flow.PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 15 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		r := s.run("warmup", "phone")
		g, _ := s.levels("phone")
		if g.HoldTTL != 15*time.Minute {
			t.Fatalf("after 'stockctl warmup phone' (exit %d): the gate's hold time is %v, want the listing's 15m kept (or the run refused, naming --record-grace)\nstdout:\n%s\nstderr:\n%s",
				r.code, g.HoldTTL, r.out, r.err)
		}
		r.exits(t, exitUsage, "--record-grace", `"phone"`, "nothing was written")
		s.run("warmup").exits(t, exitUsage, "--record-grace")
		s.run("--record-grace", "1m", "warmup", "phone").exits(t, exitOK)
		if g, _ = s.levels("phone"); g.HoldTTL != 15*time.Minute {
			t.Fatalf("after 'stockctl --record-grace 1m warmup phone': the gate's hold time is %v, want 15m", g.HoldTTL)
		}
	})
}
