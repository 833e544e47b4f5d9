package main

import (
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
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

// An order the gate held before warmup read the record, recorded and
// confirmed at both tiers between warmup's reading of the record and its
// reading of the gate (miniredis runs it before the gate's snapshot
// script): warmup must not raise the gate above what the record can take
// (that reading alone says +1), and reports the SKU written, in agreement.
func TestWarmupBesideASaleBetweenItsReadingsRaisesNothing(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		if s.mini == nil {
			t.Skip("needs miniredis's command hook to sell between warmup's readings")
		}
		s.putOnSale("lamp", 10, 0, 0)
		o := stock.Order{ID: "o-1", UserID: "alice", Items: []stock.Item{{SKU: "lamp", Qty: 1}}}
		s.deduct(s.gate, o.ID, o.UserID, "lamp", 1) // the gate step; the record's is queued
		snapshot := redis.NewScript(lua.Script("stock_snapshot.lua"))
		var once sync.Once
		s.mini.Server().SetPreHook(func(_ *server.Peer, cmd string, args ...string) bool {
			if len(args) > 0 && (cmd == "EVALSHA" && args[0] == snapshot.Hash() || cmd == "EVAL" && args[0] == lua.Script("stock_snapshot.lua")) {
				once.Do(func() {
					if err := s.flow.Settle(s.ctx, o); err != nil {
						t.Errorf("record o-1: %v", err)
					}
					if err := s.flow.Confirm(s.ctx, o.ID); err != nil {
						t.Errorf("confirm o-1: %v", err)
					}
				})
			}
			return false
		})
		s.run("warmup", "lamp").is(t, exitOK, warmHeader+
			"lamp  9     9       0          0          0           0      rebuilt\n"+
			"checked 1 SKU: 1 written\n")
		s.wantAvailable("lamp", 9, 9)
		s.run("reconcile", "--dry-run", "lamp").is(t, exitOK, "checked 1 SKU: 1 in agreement (dry run: nothing changed)\n")
	})
}
