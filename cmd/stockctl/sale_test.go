package main

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

const levelsHeader = "SKU    TIER    AVAILABLE  HELD  SOLD  HOLDS  IN FLIGHT  LIMIT  HOLD\n"

func TestPutOnSaleListsBothTiers(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		// Flags after the arguments, as an operator types them.
		s.run("put-on-sale", "phone", "100", "--limit", "2", "--hold", "10m").is(t, exitOK,
			"phone is on sale: 100 units, per-user limit 2, hold 10m0s at the gate and 20m0s at the record\n\n"+
				levelsHeader+
				"phone  gate    100        0     0     0      0          2      10m0s\n"+
				"phone  record  100        0     0     0      0          2      20m0s\n")
		g, r := s.levels("phone")
		if g.PerUserLimit != 2 || g.HoldTTL != 10*time.Minute || r.HoldTTL != 20*time.Minute {
			t.Errorf("gate %+v, record %+v: want limit 2, holds 10m and 20m", g, r)
		}

		// Again, over a live hold: the count is overwritten, the hold kept.
		s.deduct(s.flow, "o-1", "alice", "phone", 1)
		r2 := s.run("put-on-sale", "phone", "50", "-json", "--record-grace", "5m")
		r2.exits(t, exitOK)
		var got struct {
			Listing struct {
				SKU          string `json:"sku"`
				Units        int64  `json:"units"`
				PerUserLimit int64  `json:"per_user_limit"`
				GateHoldMs   int64  `json:"gate_hold_ms"`
				RecordHoldMs int64  `json:"record_hold_ms"`
			} `json:"put_on_sale"`
			SKUs []skuLevels `json:"skus"`
		}
		r2.decode(t, &got)
		if got.Listing.SKU != "phone" || got.Listing.Units != 50 || got.Listing.PerUserLimit != 0 ||
			got.Listing.GateHoldMs != 900000 || got.Listing.RecordHoldMs != 1200000 {
			t.Errorf("listing %+v: want phone, 50 units, no limit, holds 15m and 20m", got.Listing)
		}
		if len(got.SKUs) != 1 || got.SKUs[0].Gate.Available != 50 || got.SKUs[0].Gate.Held != 1 ||
			got.SKUs[0].Record.Available != 50 || got.SKUs[0].Record.Held != 1 || got.SKUs[0].Record.HoldMs != 1200000 {
			t.Errorf("levels %+v: want 50 available and 1 held at both tiers, the record holding 20m", got.SKUs)
		}
	})
}

func TestPutOnSaleRefusesBadInput(t *testing.T) {
	s := &shop{t: t}
	for _, args := range [][]string{
		{"put-on-sale", "phone"},
		{"put-on-sale", "phone", "many"},
		{"put-on-sale", "phone", "-3"},
		{"put-on-sale", "phone", "10", "--hold", "-1s"},
		{"put-on-sale", "phone", "10", "--limit", "-1"},
		{"put-on-sale", "phone", "10", "--buckets", "17"},
		{"put-on-sale", "a{b}", "10"},
	} {
		// No connection flags: refused before anything is reached.
		s.runRaw(args...).exits(t, exitUsage, "run 'stockctl put-on-sale -h' for usage")
	}
}

func TestRestockAppliesOncePerOperation(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 0)
		levels := func(n string) string {
			return levelsHeader +
				"phone  gate    " + n + "         0     0     0      0          none   15m0s\n" +
				"phone  record  " + n + "         0     0     0      0          none   30m0s\n"
		}
		s.run("restock", "phone", "5", "--op", "delivery-1").is(t, exitOK,
			"restocked phone: +5 units at both tiers (operation delivery-1)\n\n"+levels("15"))
		s.run("restock", "phone", "5", "--op", "delivery-1").is(t, exitOK,
			"operation delivery-1 was already applied to phone: nothing added\n\n"+levels("15"))
		s.wantAvailable("phone", 15, 15)

		// The same operation with another count is refused.
		s.run("restock", "phone", "6", "--op", "delivery-1").exits(t, exitUsage, "ID reused with different content")
		s.wantAvailable("phone", 15, 15)

		// A restock the record has and the gate not yet (a node stopped
		// between the two) is finished at the gate by the same command.
		if err := s.record.Restock(s.ctx, stock.Restock{OpID: "delivery-2", SKU: "phone", Units: 3}); err != nil {
			t.Fatal(err)
		}
		s.run("restock", "phone", "3", "--op", "delivery-2").is(t, exitOK,
			"operation delivery-2 was at the record only: +3 units at the gate now\n\n"+levels("18"))

		r := s.run("restock", "--op", "delivery-3", "phone", "2", "-json")
		r.exits(t, exitOK)
		var got struct {
			Restock struct {
				Op            string `json:"op"`
				SKU           string `json:"sku"`
				Units         int64  `json:"units"`
				AddedAtRecord bool   `json:"added_at_record"`
				AddedAtGate   bool   `json:"added_at_gate"`
			} `json:"restock"`
			SKUs []skuLevels `json:"skus"`
		}
		r.decode(t, &got)
		if rs := got.Restock; rs.Op != "delivery-3" || rs.SKU != "phone" || rs.Units != 2 || !rs.AddedAtRecord || !rs.AddedAtGate {
			t.Errorf("restock %+v: want delivery-3, 2 units of phone added at both tiers", rs)
		}
		if len(got.SKUs) != 1 || got.SKUs[0].Gate.Available != 20 || got.SKUs[0].Record.Available != 20 {
			t.Errorf("levels %+v: want 20 available at both tiers", got.SKUs)
		}
		s.wantAvailable("phone", 20, 20)
	})
}

func TestRestockUnknownSKUAndMissingOp(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		r := s.run("restock", "nosuch", "5", "--op", "delivery-1")
		r.is(t, exitUnknownSKU, "")
		r.exits(t, exitUnknownSKU, `unknown SKU: "nosuch" is not on sale in table`)
		s.run("restock", "phone", "5").exits(t, exitUsage, "--op is required")
		s.run("restock", "phone", "0", "--op", "x").exits(t, exitUsage, `UNITS "0"`)
	})
}

// The record's hold is capped at stock.MaxHoldTTL, so a hold near the cap,
// or a short one with a record grace no longer than a reclaimer's
// interval, would leave the record ending holds the gate still counts:
// put-on-sale refuses it, as stockguard.Shop.PutOnSale does, and writes
// nothing at either tier.
func TestPutOnSaleRefusesAHoldThatLeavesTheRecordNoGrace(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		for _, args := range [][]string{
			{"put-on-sale", "phone", "5", "--hold", "720h"},
			{"put-on-sale", "phone", "5", "--hold", "719h59m59s"},
			{"put-on-sale", "phone", "5", "--hold", "1s"},
			{"put-on-sale", "phone", "5", "--hold", "10m", "--record-grace", "1s"},
		} {
			s.run(args...).exits(t, exitUsage, "leaves the record")
			for name, m := range map[string]stock.Manager{"gate": s.gate, "record": s.record} {
				if _, err := m.Levels(s.ctx, "phone"); !errors.Is(err, stock.ErrUnknownSKU) {
					t.Errorf("%v: %s levels %v, want ErrUnknownSKU (nothing written)", args, name, err)
				}
			}
		}
		s.run("put-on-sale", "phone", "5", "--hold", "719h").exits(t, exitOK)
	})
}
