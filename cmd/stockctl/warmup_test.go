package main

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

const warmHeader = "SKU   GATE  RECORD  IN FLIGHT  RETURNING  RESTOCKING  DELTA  ACTION\n"

func TestWarmupLoadsTheGateFromTheRecord(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		// Listed at the record alone, as a shop's migration or back office
		// would, with the record's (longer) hold times.
		for _, l := range []stock.Listing{
			{SKU: "lamp", Units: 7, PerUserLimit: 1, HoldTTL: 30 * time.Minute},
			{SKU: "desk", Units: 3, HoldTTL: 20 * time.Minute},
		} {
			if err := s.record.PutOnSale(s.ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		s.run("warmup", "--dry-run").is(t, exitOK, warmHeader+
			"desk  0     3       0          0          0           +3     dry-run\n"+
			"lamp  0     7       0          0          0           +7     dry-run\n"+
			"checked 2 SKUs: 2 to write (dry run: nothing changed)\n")
		if st, err := s.gate.Inspect(s.ctx, []string{"lamp", "desk"}); err != nil || st[0].Exists || st[1].Exists {
			t.Fatalf("after a dry run the gate has %+v, %v: want nothing", st, err)
		}

		s.run("warmup").is(t, exitOK, warmHeader+
			"desk  0     3       0          0          0           +3     rebuilt\n"+
			"lamp  0     7       0          0          0           +7     rebuilt\n"+
			"checked 2 SKUs: 2 written\n")
		g, _ := s.levels("lamp")
		if g.Available != 7 || g.PerUserLimit != 1 || g.HoldTTL != 15*time.Minute {
			t.Errorf("lamp at the gate %+v: want 7 available, limit 1, hold 15m (the record's 30m less the grace)", g)
		}
		if g, _ := s.levels("desk"); g.Available != 3 || g.HoldTTL != 10*time.Minute {
			t.Errorf("desk at the gate %+v: want 3 available, hold 10m", g)
		}
	})
}

func TestWarmupRefusesLiveHoldsUnlessForced(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("lamp", 7, 0, 0)
		s.deduct(s.flow, "o-1", "alice", "lamp", 1) // selling: a live hold
		if err := s.record.PutOnSale(s.ctx, stock.Listing{SKU: "lamp", Units: 20, HoldTTL: s.flow.RecordHold(stock.DefaultHoldTTL)}); err != nil {
			t.Fatal(err)
		}
		r := s.run("warmup", "lamp")
		r.is(t, exitUnresolved, "SKU   GATE  RECORD  IN FLIGHT  RETURNING  RESTOCKING  DELTA  ACTION   NOTE\n"+
			`lamp  6     20      0          0          0           +14    refused  reconcile: SKU has live holds in Redis: "lamp" holds 1 units`+"\n"+
			"checked 1 SKU: 1 refused (live holds)\n")
		r.exits(t, exitUnresolved, "--force writes them anyway")
		s.wantAvailable("lamp", 6, 20)

		s.run("warmup", "--force", "lamp").is(t, exitOK, warmHeader+
			"lamp  6     20      0          0          0           +14    rebuilt\n"+
			"checked 1 SKU: 1 written\n")
		s.wantAvailable("lamp", 20, 20)
		if g, _ := s.levels("lamp"); g.Held != 1 {
			t.Errorf("the forced warm-up left %d held, want the live hold's 1", g.Held)
		}
	})
}

func TestWarmupUnknownSKU(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("lamp", 7, 0, 0)
		r := s.run("warmup", "lamp", "nosuch")
		r.exits(t, exitUnknownSKU, `unknown SKU: "nosuch" (not in table`)
		s.wantAvailable("lamp", 7, 7)
	})
}
