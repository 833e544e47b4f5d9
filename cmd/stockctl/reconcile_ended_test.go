package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// A pass that reverts at the gate an order the record cancelled
// (ActionEnded) says so in the summary line under its table, as it does
// for every other action it took, and -json reports the units it ended
// (reconcile.Correction.Ended).
func TestReconcileSummaryCountsEndedOrders(t *testing.T) {
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

func TestReconcileJSONReportsEndedUnits(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 0)
		s.deduct(s.flow, "o-1", "alice", "phone", 2)
		if err := s.record.Revert(s.ctx, "o-1"); err != nil {
			t.Fatal(err)
		}
		r := s.run("reconcile", "--apply", "-json", "phone")
		r.exits(t, exitOK)
		var got struct {
			Corrections []struct {
				SKU    string `json:"sku"`
				Action string `json:"action"`
				Delta  int64  `json:"delta"`
				Ended  int64  `json:"ended"`
			} `json:"corrections"`
		}
		if err := json.Unmarshal([]byte(r.out), &got); err != nil {
			t.Fatalf("stdout:\n%s\n%v", r.out, err)
		}
		if len(got.Corrections) != 1 || got.Corrections[0].Action != "ended" || got.Corrections[0].Ended != 2 || got.Corrections[0].Delta != 0 {
			t.Errorf("stdout:\n%s\nwant one entry, ended, with the ended units (2) and no delta", r.out)
		}
	})
}
