package main

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// 'stockctl restock -h': "A restock the record has and the gate not yet is
// completed at the gate by the next run, or by 'stockctl reconcile --apply'
// within reconcile's restock window". Past that window such a restock is
// drift (reconcile.Config.RestockWindow: "A restock older than the window
// that never reached the gate is drift"), which --apply corrects only up to
// --max-fix. The window is reconcile's default, half the gate's Retention
// (--retention): the help states the one stockctl uses, 12h by default
// (it used to state 1h, where a restock 2h old was still completed as one),
// 1h with --retention 2h, and a restock past it is drift.
func TestRestockHelpStatesTheReconcileWindowItUses(t *testing.T) {
	s := newShop(t, backends()[0]) // miniredis + SQLite
	s.run("restock", "-h").prints(t, "window, 12h (half of --retention 24h)")
	s.run("--retention", "2h", "restock", "-h").prints(t, "window, 1h (half of --retention 2h)")
	s.run("restock", "--retention", "2h", "-h").prints(t, "window, 1h (half of --retention 2h)")
	s.env = map[string]string{"STOCKCTL_RETENTION": "2h"}
	s.run("help", "restock").prints(t, "window, 1h (half of --retention 2h)")
	s.env = nil

	s.putOnSale("phone", 10, 0, 0)
	if err := s.record.Restock(s.ctx, stock.Restock{OpID: "delivery-7", SKU: "phone", Units: 5}); err != nil {
		t.Fatal(err) // the record took it; the gate never did (a restock stopped between the tiers)
	}
	s.clock.Advance(2 * time.Hour)

	// Within the default 12h window the 5 units are restocking, not drift.
	s.run("reconcile", "--dry-run").is(t, exitUnresolved, driftHeader+
		"phone  10    15      0          0          5           0      dry-run\n"+
		"checked 1 SKU: 0 in agreement, 1 out of agreement (dry run: nothing changed)\n")

	// Past the 1h window the help states for --retention 2h, the 5 units are
	// drift: the gate needs +5 (DELTA +5), with nothing restocking.
	s.run("--retention", "2h", "reconcile", "--dry-run").is(t, exitUnresolved, driftHeader+
		"phone  10    15      0          0          0           +5     dry-run\n"+
		"checked 1 SKU: 0 in agreement, 1 out of agreement (dry run: nothing changed)\n")
}
