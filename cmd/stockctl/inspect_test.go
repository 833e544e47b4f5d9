package main

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

func TestInspectShowsBothTiers(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 2, 15*time.Minute)
		s.putOnSale("case", 5, 0, 0)
		s.deduct(s.flow, "o-1", "alice", "phone", 2) // held at both tiers
		s.deduct(s.gate, "o-2", "bob", "phone", 1)   // at the gate only: in flight
		s.deduct(s.flow, "o-3", "carol", "phone", 1)
		if err := s.flow.Confirm(s.ctx, "o-3"); err != nil {
			t.Fatal(err)
		}
		r := s.run("inspect", "phone", "case")
		r.is(t, exitOK, ""+
			"SKU    TIER    AVAILABLE  HELD  SOLD  HOLDS  IN FLIGHT  LIMIT  HOLD\n"+
			"phone  gate    6          3     1     2      1          2      15m0s\n"+
			"phone  record  7          2     1     1      0          2      30m0s\n"+
			"case   gate    5          0     0     0      0          none   15m0s\n"+
			"case   record  5          0     0     0      0          none   30m0s\n")
		if r.err != "" {
			t.Errorf("stderr:\n%s\nwant nothing", r.err)
		}
		// A --record-grace that is not the shop's shows as settings the
		// flow would not have given the gate.
		s.run("--record-grace", "5m", "inspect", "case").exits(t, exitOK,
			`note: "case" has limit none and hold 15m0s at the gate, where the record's settings give limit none and hold 25m0s`)

		// A hold the gate returned and the record still has is in flight on
		// the record's side.
		if err := s.gate.Revert(s.ctx, "o-1"); err != nil {
			t.Fatal(err)
		}
		s.run("inspect", "phone").is(t, exitOK, ""+
			"SKU    TIER    AVAILABLE  HELD  SOLD  HOLDS  IN FLIGHT  LIMIT  HOLD\n"+
			"phone  gate    8          1     1     1      1          2      15m0s\n"+
			"phone  record  7          2     1     1      2          2      30m0s\n")
	})
}

func TestInspectJSON(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 2, 15*time.Minute)
		s.deduct(s.gate, "o-1", "bob", "phone", 2)
		r := s.run("inspect", "-json", "phone", "nosuch", "phone")
		r.exits(t, exitUnknownSKU, `stock: unknown SKU: "nosuch" (not in Redis under prefix`)
		var got struct {
			SKUs    []skuLevels `json:"skus"`
			Unknown []string    `json:"unknown"`
		}
		r.decode(t, &got)
		if len(got.SKUs) != 1 || len(got.Unknown) != 1 || got.Unknown[0] != "nosuch" {
			t.Fatalf("skus %+v, unknown %v: want phone, and nosuch unknown", got.SKUs, got.Unknown)
		}
		l := got.SKUs[0]
		if l.Gate.Version < 1 || l.Record.Version < 0 {
			t.Errorf("versions %d, %d: want the gate's above 0 (a put on sale and a deduct)", l.Gate.Version, l.Record.Version)
		}
		l.Gate.Version, l.Record.Version = 0, 0
		want := skuLevels{SKU: "phone",
			Gate:   tierLevels{OnSale: true, Available: 8, Held: 2, Holds: 1, InFlight: 2, PerUserLimit: 2, HoldMs: 900000, MaxHoldMs: 900000},
			Record: tierLevels{OnSale: true, Available: 10, PerUserLimit: 2, HoldMs: 1800000, MaxHoldMs: 1800000}}
		if l != want {
			t.Errorf("levels\n%+v\nwant\n%+v", l, want)
		}
	})
}

func TestInspectUnknownAndOneSided(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		r := s.run("inspect", "nosuch")
		r.is(t, exitUnknownSKU, "")
		r.exits(t, exitUnknownSKU, `unknown SKU: "nosuch"`)

		// Put on sale at the record alone (a migration, a gate that lost it):
		// shown, and left unresolved.
		if err := s.record.PutOnSale(s.ctx, stock.Listing{SKU: "lamp", Units: 4}); err != nil {
			t.Fatal(err)
		}
		r = s.run("inspect", "lamp")
		r.is(t, exitUnresolved, ""+
			"SKU   TIER    AVAILABLE  HELD  SOLD  HOLDS  IN FLIGHT  LIMIT  HOLD\n"+
			"lamp  gate    -          -     -     -      -          -      -\n"+
			"lamp  record  4          0     0     0      0          none   15m0s\n")
		r.exits(t, exitUnresolved, `"lamp" is on the record only`, "stockctl reconcile --apply lamp")
	})
}

// A hold time whose record hold tiered capped at stock.MaxHoldTTL is the
// flow's own writing: inspect notes nothing about it (20 days at the gate
// give a default record 30, as 15 days would).
func TestInspectTakesACappedHoldAsTheFlows(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 20*24*time.Hour)
		r := s.run("inspect", "phone")
		if r.code != exitOK || r.err != "" {
			t.Fatalf("inspect: exit %d, stderr:\n%s\nwant exit 0 and nothing", r.code, r.err)
		}
	})
}
