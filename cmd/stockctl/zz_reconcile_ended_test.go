package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// Promise (reconcile doc, Policy; stockctl reconcile's ACTION list): a
// pass that ends at the gate an order the record ended (ActionEnded) says
// so in the summary line under its table, as it does for every other
// action it took, and -json reports the units it ended
// (reconcile.Correction.Ended).
func TestZZReconcileSummaryCountsEndedOrders(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 0)
		s.deduct(s.flow, "o-1", "alice", "phone", 2)
		if err := s.record.Revert(s.ctx, "o-1"); err != nil { // a cancel at the record alone
			t.Fatal(err)
		}
		r := s.run("reconcile", "--apply", "phone")
		if r.code != exitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
		}
		s.wantAvailable("phone", 10, 10)
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		last := lines[len(lines)-1]
		if !strings.Contains(r.out, " ended") || !strings.Contains(last, "ended") {
			t.Errorf("stdout:\n%s\nwant the summary line to count the ended order (\"1 ended\")", r.out)
		}
	})
}

func TestZZReconcileJSONReportsEndedUnits(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 0)
		s.deduct(s.flow, "o-1", "alice", "phone", 2)
		if err := s.record.Revert(s.ctx, "o-1"); err != nil {
			t.Fatal(err)
		}
		r := s.run("reconcile", "--apply", "-json", "phone")
		r.exits(t, exitOK)
		if !strings.Contains(r.out, `"ended"`) || !strings.Contains(r.out, `"ended":2`) {
			t.Errorf("stdout:\n%s\nwant the ended units (2) in the JSON report", r.out)
		}
	})
}

// Promise (stockguard.Shop.PutOnSale, fix-holdcap; DESIGN "the user's
// wiring is the proven wiring: a part wired by hand derives the setting or
// refuses a contradictory one"): a listing whose longest hold leaves the
// record no grace before stock.MaxHoldTTL is refused with nothing
// written. stockctl put-on-sale, the operator's way to list a SKU for the
// shop's nodes, writes it.
func TestZZPutOnSaleRefusesAHoldAtTheCap(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		r := s.run("put-on-sale", "phone", "5", "--hold", stock.MaxHoldTTL.String())
		if r.code == exitOK {
			t.Errorf("put-on-sale --hold %v: exit 0, want a refusal (the record's deadline is capped at the gate's)", stock.MaxHoldTTL)
		}
		if _, err := s.record.Levels(s.ctx, "phone"); err == nil {
			l, _ := s.record.Levels(s.ctx, "phone")
			t.Errorf("record lists phone with hold %v (gate hold %v): nothing should be written", l.HoldTTL, time.Duration(stock.MaxHoldTTL))
		}
	})
}
