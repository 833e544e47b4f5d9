package main

import (
	"testing"

	"github.com/stockguard/stockguard/stock"
)

const driftHeader = "SKU    GATE  RECORD  IN FLIGHT  RETURNING  RESTOCKING  DELTA  ACTION\n"

func TestReconcileDryRunReportsAndApplyRepairs(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 0)
		s.putOnSale("case", 5, 0, 0)
		s.adjust("phone", +5)                       // the drift: the gate could sell 5 units the record does not have
		s.deduct(s.gate, "o-9", "", "phone", 2)     // and a hold in flight, which is not drift
		s.deduct(s.flow, "o-1", "alice", "case", 1) // recorded: nothing to repair

		dry := s.run("reconcile", "--dry-run")
		dry.is(t, exitUnresolved, driftHeader+
			"phone  13    10      2          0          0           -5     dry-run\n"+
			"checked 2 SKUs: 1 in agreement, 1 out of agreement (dry run: nothing changed)\n")
		dry.exits(t, exitUnresolved, "1 SKU out of agreement: 'stockctl reconcile --apply' repairs it")
		s.wantAvailable("phone", 13, 10)

		// A named SKU is one Repair; one in agreement exits 0.
		s.run("reconcile", "--dry-run", "case").is(t, exitOK, "checked 1 SKU: 1 in agreement (dry run: nothing changed)\n")

		// Larger than --max-fix: left for a person, and said so.
		left := s.run("reconcile", "--apply", "--max-fix", "3", "phone")
		left.is(t, exitUnresolved, driftHeader+
			"phone  13    10      2          0          0           -5     left\n"+
			"checked 1 SKU: 0 in agreement, 1 left\n")
		left.exits(t, exitUnresolved, "drift left unresolved", "--max-fix -1 applies any")
		s.wantAvailable("phone", 13, 10)

		s.run("reconcile", "--apply").is(t, exitOK, driftHeader+
			"phone  13    10      2          0          0           -5     corrected\n"+
			"checked 2 SKUs: 1 in agreement, 1 corrected\n")
		s.wantAvailable("phone", 8, 10) // the record's 10, less the 2 in flight
		s.run("reconcile", "--dry-run").is(t, exitOK, "checked 2 SKUs: 2 in agreement (dry run: nothing changed)\n")
	})
}

func TestReconcileJSON(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 0)
		s.adjust("phone", -4) // the gate sells less than it could: drift too
		r := s.run("reconcile", "--dry-run", "-json", "phone")
		r.exits(t, exitUnresolved)
		var got struct {
			Command     string       `json:"command"`
			DryRun      bool         `json:"dry_run"`
			Checked     int          `json:"checked"`
			InAgreement int          `json:"in_agreement"`
			Corrections []correction `json:"corrections"`
		}
		r.decode(t, &got)
		want := correction{SKU: "phone", Action: "dry-run", Gate: 6, Record: 10, Delta: 4, Target: 10}
		if got.Command != "reconcile" || !got.DryRun || got.Checked != 1 || got.InAgreement != 0 ||
			len(got.Corrections) != 1 || got.Corrections[0] != want {
			t.Fatalf("report %+v: want one dry-run correction %+v", got, want)
		}
		r = s.run("reconcile", "--apply", "-json", "phone")
		r.exits(t, exitOK)
		r.decode(t, &got)
		want.Action = "corrected"
		if got.DryRun || len(got.Corrections) != 1 || got.Corrections[0] != want {
			t.Fatalf("report %+v: want one correction %+v", got, want)
		}
		s.wantAvailable("phone", 10, 10)
	})
}

func TestReconcileRebuildsALostGate(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		// On sale at the record only: the gate has no state for it, as
		// after a flush. The pass rebuilds it (with the flow's gate hold).
		if err := s.record.PutOnSale(s.ctx, stock.Listing{SKU: "lamp", Units: 4, HoldTTL: s.flow.RecordHold(stock.DefaultHoldTTL)}); err != nil {
			t.Fatal(err)
		}
		s.run("reconcile", "--dry-run").is(t, exitUnresolved, ""+
			"SKU   GATE  RECORD  IN FLIGHT  RETURNING  RESTOCKING  DELTA  ACTION\n"+
			"lamp  0     4       0          0          0           +4     dry-run\n"+
			"checked 1 SKU: 0 in agreement, 1 out of agreement (dry run: nothing changed)\n")
		s.run("reconcile", "--apply", "lamp").is(t, exitOK, ""+
			"SKU   GATE  RECORD  IN FLIGHT  RETURNING  RESTOCKING  DELTA  ACTION\n"+
			"lamp  0     4       0          0          0           +4     rebuilt\n"+
			"checked 1 SKU: 0 in agreement, 1 rebuilt\n")
		g, _ := s.levels("lamp")
		if g.Available != 4 || g.HoldTTL != stock.DefaultHoldTTL {
			t.Errorf("rebuilt gate %+v: want 4 available, hold %s", g, stock.DefaultHoldTTL)
		}
	})
}

func TestReconcileRefusesUnknownSKUsAndBadModes(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 0)
		s.adjust("phone", +1)
		r := s.run("reconcile", "--apply", "phone", "nosuch")
		r.is(t, exitUnknownSKU, "")
		r.exits(t, exitUnknownSKU, `unknown SKU: "nosuch"`)
		s.wantAvailable("phone", 11, 10) // nothing was done

		// On sale at the gate with no row in the record: nothing a pass can
		// compute, said in NOTE, left for a person.
		if err := s.gate.PutOnSale(s.ctx, stock.Listing{SKU: "ghost", Units: 3}); err != nil {
			t.Fatal(err)
		}
		r = s.run("reconcile", "--apply", "ghost")
		r.is(t, exitUnresolved, ""+
			"SKU    GATE  RECORD  IN FLIGHT  RETURNING  RESTOCKING  DELTA  ACTION  NOTE\n"+
			`ghost  3     0       0          0          0           -3     failed  reconcile: SKU is on sale in Redis but has no row in the database: "ghost"`+"\n"+
			"checked 1 SKU: 0 in agreement, 1 failed\n")
		r.exits(t, exitUnresolved, "drift left unresolved", "NOTE says why")
		if g, _ := s.gate.Available(s.ctx, "ghost"); g != 3 {
			t.Errorf("the gate's ghost has %d available after the pass, want 3: nothing applied", g)
		}

		s.run("reconcile").exits(t, exitUsage, "give one of --dry-run")
		s.run("reconcile", "--dry-run", "--apply").exits(t, exitUsage, "give one of --dry-run")
	})
}
