package main

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock/stocktest"
)

func TestHoldsListsBothTiersOldestFirst(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 15*time.Minute) // the record holds 30m
		s.putOnSale("case", 5, 0, 0)
		s.deduct(s.flow, "o-1", "alice", "phone", 2) // 00:00, both tiers
		s.deduct(s.flow, "o-9", "dave", "case", 1)   // another SKU: not listed
		s.clock.Advance(time.Minute)
		s.deduct(s.record, "o-3", "carol", "phone", 1) // 00:01, the record only
		s.deduct(s.gate, "o-2", "", "phone", 1)        // 00:01, the gate only
		s.clock.Advance(time.Minute)

		header := "ORDER  USER   QTY  TIERS        GATE DEADLINE             RECORD DEADLINE           LEFT\n"
		s.run("holds", "phone").is(t, exitOK, header+
			"o-1    alice  2    both         2026-01-01T00:15:00.000Z  2026-01-01T00:30:00.000Z  13m0s\n"+
			"o-2    -      1    gate only    2026-01-01T00:16:00.000Z  -                         14m0s\n"+
			"o-3    carol  1    record only  -                         2026-01-01T00:31:00.000Z  29m0s\n"+
			"3 live holds of phone: 1 on both tiers, 1 on the gate only, 1 on the record only\n")

		// Past the gate deadlines, with no reclaimer run: due.
		s.clock.Advance(14 * time.Minute)
		s.run("holds", "--max", "2", "phone").is(t, exitOK, ""+
			"ORDER  USER   QTY  TIERS      GATE DEADLINE             RECORD DEADLINE           LEFT\n"+
			"o-1    alice  2    both       2026-01-01T00:15:00.000Z  2026-01-01T00:30:00.000Z  due\n"+
			"o-2    -      1    gate only  2026-01-01T00:16:00.000Z  -                         due\n"+
			"3 live holds of phone: 1 on both tiers, 1 on the gate only, 1 on the record only; the oldest 2 shown (--max)\n")

		r := s.run("holds", "phone", "-json", "--max", "1")
		r.exits(t, exitOK)
		var got struct {
			SKU        string   `json:"sku"`
			Total      int      `json:"total"`
			Both       int      `json:"both"`
			GateOnly   int      `json:"gate_only"`
			RecordOnly int      `json:"record_only"`
			Holds      []hold   `json:"holds"`
			Lost       []string `json:"lost"`
		}
		r.decode(t, &got)
		if got.SKU != "phone" || got.Total != 3 || got.Both != 1 || got.GateOnly != 1 || got.RecordOnly != 1 ||
			len(got.Holds) != 1 || len(got.Lost) != 0 {
			t.Fatalf("holds JSON %+v: want phone, 3 holds (1 of each kind), 1 shown, none lost", got)
		}
		h := got.Holds[0]
		if h.Order != "o-1" || h.User != "alice" || h.Qty != 2 || h.Tiers != "both" ||
			h.GateDeadline == nil || !h.GateDeadline.Equal(stocktest.Epoch.Add(15*time.Minute)) ||
			h.RecordDeadline == nil || !h.RecordDeadline.Equal(stocktest.Epoch.Add(30*time.Minute)) {
			t.Errorf("hold %+v: want o-1 of alice, 2 units at both tiers, due 00:15 at the gate and 00:30 at the record", h)
		}

		// Confirmed and reverted orders are no longer live holds.
		for _, id := range []string{"o-1", "o-2", "o-3"} {
			if err := s.flow.Revert(s.ctx, id); err != nil {
				t.Fatalf("revert %s: %v", id, err)
			}
		}
		s.run("holds", "phone").is(t, exitOK, "no live holds of phone\n")
	})
}

func TestHoldsWithoutTheirLineRecord(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 0)
		s.deduct(s.gate, "o-1", "", "phone", 2)
		s.deduct(s.gate, "o-2", "", "phone", 1)
		// The line record deleted by hand (redisstock's key layout: a
		// field of the SKU's lines hash): the hold stays in the SKU's
		// holds, its quantity unknown.
		if err := s.rc.HDel(s.ctx, s.prefix+":{phone}:lines", "o-1").Err(); err != nil {
			t.Fatal(err)
		}
		r := s.run("holds", "phone", "-json")
		r.exits(t, exitOK, `note: the gate holds 1 order of "phone" whose line records are gone (quantity unknown, never returned by Redis): o-1`)
		var got struct {
			SKU        string   `json:"sku"`
			Total      int      `json:"total"`
			Both       int      `json:"both"`
			GateOnly   int      `json:"gate_only"`
			RecordOnly int      `json:"record_only"`
			Holds      []hold   `json:"holds"`
			Lost       []string `json:"lost"`
		}
		r.decode(t, &got)
		if got.Total != 1 || got.GateOnly != 1 || len(got.Holds) != 1 || got.Holds[0].Order != "o-2" ||
			len(got.Lost) != 1 || got.Lost[0] != "o-1" {
			t.Fatalf("holds %+v: want o-2 listed and o-1 lost", got)
		}
		s.run("inspect", "phone").exits(t, exitOK, `note: the gate has 1 hold of "phone" whose line records are gone`)
	})
}

func TestHoldsUnknownSKU(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		r := s.run("holds", "nosuch")
		r.is(t, exitUnknownSKU, "")
		r.exits(t, exitUnknownSKU, `unknown SKU: "nosuch"`)
		s.runRaw("holds").exits(t, exitUsage, "name one SKU")
	})
}
