package reconcile_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A listing whose record settings tiered capped at stock.MaxHoldTTL is in
// agreement as the flow wrote it: a pass compares the gate's settings by
// what they give the record, not by the smallest gate settings that give
// it, and leaves the gate's hold time and maximum as the listing set them.
func TestRepairKeepsSettingsTheCapFolded(t *testing.T) {
	const day = 24 * time.Hour
	for _, tc := range []struct {
		name    string
		grace   time.Duration
		listing stock.Listing
	}{
		{"default grace, hold past half the cap", 0, stock.Listing{HoldTTL: 20 * day}},
		{"default grace, maximum past the cap", 0, stock.Listing{HoldTTL: 10 * day, MaxHoldTTL: 30 * day}},
		{"grace 1h, hold at the cap", time.Hour, stock.Listing{HoldTTL: stock.MaxHoldTTL}},
		{"grace 1h, maximum at the cap", time.Hour, stock.Listing{HoldTTL: 20 * time.Hour, MaxHoldTTL: stock.MaxHoldTTL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEach(t, func(t *testing.T, p pair) {
				w := newWorld(t, p, reconcile.Config{})
				flow := tiered.New(w.gate, w.record, tiered.Config{RecordGrace: tc.grace, Clock: w.clock})
				l := tc.listing
				l.SKU, l.Units = "a", 10
				w.must(flow.PutOnSale(w.ctx, l), "put on sale")
				r, err := reconcile.New(w.gate, w.record, reconcile.Config{GateHold: flow.GateHold})
				w.must(err, "New")
				rep, err := r.Repair(w.ctx, []string{"a"})
				if err != nil || len(rep.Corrections) != 0 {
					t.Fatalf("Repair: %v, %+v; want agreement", err, rep.Corrections)
				}
				if g, _ := w.levels("a"); g.HoldTTL != l.EffectiveHoldTTL() || g.MaxHoldTTL != l.EffectiveMaxHoldTTL() {
					t.Fatalf("gate after the pass: hold %v, max %v; want the listing's %v, %v",
						g.HoldTTL, g.MaxHoldTTL, l.EffectiveHoldTTL(), l.EffectiveMaxHoldTTL())
				}
			})
		})
	}
}

// At the cap a gate hold time that does not give the record's still
// differs: a record at stock.MaxHoldTTL behind a gate holding 10 days (a
// default tiered record of 20) gets the smallest gate hold time that maps
// to it, 15 days.
func TestRepairRaisesAGateHoldBelowTheCapsLeast(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.must(w.flow.PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: 10 * 24 * time.Hour}), "put on sale")
		w.must(w.flow.Fallback().PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: 20 * 24 * time.Hour}),
			"put on sale at the record alone")
		if _, rec := w.levels("a"); rec.HoldTTL != stock.MaxHoldTTL {
			t.Fatalf("record hold %v, want the cap", rec.HoldTTL)
		}
		rep, err := w.rec.Repair(w.ctx, []string{"a"})
		w.must(err, "Repair")
		if len(rep.Corrections) != 1 || !rep.Corrections[0].Settings {
			t.Fatalf("Repair %+v, want one correction of the settings", rep.Corrections)
		}
		if g, _ := w.levels("a"); g.HoldTTL != stock.MaxHoldTTL/2 {
			t.Fatalf("gate hold after the repair %v, want %v", g.HoldTTL, stock.MaxHoldTTL/2)
		}
	})
}

// A repair that gives the gate another setting of the record's (here the
// per-user limit, changed at the record alone) keeps the gate's hold time
// and maximum where they already give the record's: a 20-day listing
// stays at 20 days, not the 15 a rebuild would give it.
func TestRepairOfAnotherSettingKeepsAFoldedHoldTime(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		l := stock.Listing{SKU: "a", Units: 10, HoldTTL: 20 * 24 * time.Hour}
		w.must(w.flow.PutOnSale(w.ctx, l), "put on sale")
		l.PerUserLimit = 3
		w.must(w.flow.Fallback().PutOnSale(w.ctx, l), "put on sale at the record alone")
		for _, pass := range []string{"Repair", "WarmUp"} {
			var err error
			var rep reconcile.Report
			if pass == "Repair" {
				rep, err = w.rec.Repair(w.ctx, []string{"a"})
			} else {
				rep, err = w.rec.WarmUp(w.ctx, []string{"a"}, true)
			}
			w.must(err, pass)
			if pass == "Repair" && (len(rep.Corrections) != 1 || !rep.Corrections[0].Settings) {
				t.Fatalf("Repair %+v, want one correction of the settings", rep.Corrections)
			}
			if g, _ := w.levels("a"); g.PerUserLimit != 3 || g.HoldTTL != l.HoldTTL || g.MaxHoldTTL != l.HoldTTL {
				t.Fatalf("gate after %s: limit %d, hold %v, max %v; want limit 3, hold and max %v",
					pass, g.PerUserLimit, g.HoldTTL, g.MaxHoldTTL, l.HoldTTL)
			}
		}
	})
}
