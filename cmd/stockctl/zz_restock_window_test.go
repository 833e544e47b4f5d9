package main

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// 'stockctl restock -h': "A restock the record has and the gate not yet is
// completed at the gate by the next run, or by 'stockctl reconcile --apply'
// within reconcile's restock window (1h)." Past that window such a restock
// is drift (reconcile.Config.RestockWindow: "A restock older than the
// window that never reached the gate is drift"), which --apply corrects
// only up to --max-fix. stockctl's window is reconcile's default, half the
// gate's Retention: 12h, so a restock 2h old is still completed as one
// (RESTOCKING), not reported as drift as the help says.
func TestRestockHelpStatesTheReconcileWindowItUses(t *testing.T) {
	s := newShop(t, backends()[0]) // miniredis + SQLite
	s.putOnSale("phone", 10, 0, 0)
	if err := s.record.Restock(s.ctx, stock.Restock{OpID: "delivery-7", SKU: "phone", Units: 5}); err != nil {
		t.Fatal(err) // the record took it; the gate never did (a restock stopped between the tiers)
	}
	s.clock.Advance(2 * time.Hour) // past the help's 1h window

	// Past the window the 5 units are drift: the gate needs +5 (DELTA +5),
	// with nothing restocking.
	s.run("reconcile", "--dry-run").is(t, exitUnresolved, driftHeader+
		"phone  10    15      0          0          0           +5     dry-run\n"+
		"checked 1 SKU: 0 in agreement, 1 out of agreement (dry run: nothing changed)\n")
}
