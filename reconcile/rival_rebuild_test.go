package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A SKU of 5,000 units lost its gate state. Pass B reads it and, before
// B's rebuild, pass A rebuilds it in full (not beside living buckets), an
// order of 2,000 is sold and confirmed at both tiers, and its refund
// reaches the gate (stock/tiered reverts at the gate, then at the record).
// B's rebuild finds A's state (Exists) and B reads the SKU during the
// refund: the gate 2,000 above the record, a one-sided moment the package
// doc says is corrected down and brought back up by the next pass. At 2,000
// the correction is above MaxAutoFix (1,000), which is reported and left
// for a person (Config.MaxAutoFix); the exception is only for a SKU a
// rebuild put on sale beside living buckets, and A's was not. If B makes
// it anyway, once the refund reaches the record the next pass's
// correction back up (2,000) is above MaxAutoFix too, left: the gate stays
// 2,000 units below the record, units the shop has and cannot sell, and
// every later pass returns ErrUnresolved. (B cannot tell A's rebuild from
// a Partial one: it reports the correction left, and A's pass or the next
// one settles the SKU.)
//
// The same holds when the state B's rebuild finds is not a reconciler's
// at all but a new listing's: stock/tiered's PutOnSale puts the SKU on
// sale at the record, then at the gate, and B reads it in between.
func TestRivalFullRebuildThenRefundKeepsGateAtRecord(t *testing.T) {
	for _, p := range r3bClusterPairs() {
		for _, putOnSale := range []bool{false, true} {
			name := p.name + "/rival-rebuild"
			if putOnSale {
				name = p.name + "/put-on-sale"
			}
			t.Run(name, func(t *testing.T) { rivalThenRefund(t, p, putOnSale) })
		}
	}
}

// rivalThenRefund runs TestRivalFullRebuildThenRefundKeepsGateAtRecord
// on p, the state B's rebuild finds made by a rival reconciler's rebuild
// or (putOnSale) by the gate step of a new listing's PutOnSale.
func rivalThenRefund(t *testing.T, p pair, putOnSale bool) {
	testdb.Need(t, p.needs...)
	w := newWorld(t, p, reconcile.Config{})
	const sku = "rivalrefund"
	l := stock.Listing{SKU: sku, Units: 5000, HoldTTL: time.Minute}
	if putOnSale {
		w.must(w.record.PutOnSale(w.ctx, w.flow.RecordListing(l)), "PutOnSale at the record") // tiered's first step
	} else {
		w.must(w.flow.PutOnSale(w.ctx, l), "PutOnSale")
		w.r3bLoseSlot(sku)
	}

	a, err := reconcile.New(w.gate, w.record, reconcile.Config{Clock: w.clock})
	w.must(err, "New A")
	// B's gate: its first Rebuild of the SKU comes after another
	// reconciler rebuilt the SKU in full (redisstock Applied, nothing
	// Partial), or the gate step of PutOnSale put it on sale, and the shop
	// sold and began refunding an order.
	g := &rebuildGate{Gate: w.gate, first: func(context.Context) {
		if putOnSale {
			w.must(w.gate.PutOnSale(w.ctx, l), "PutOnSale at the gate") // tiered's second step
		} else {
			repA, err := a.Repair(w.ctx, []string{sku})
			w.must(err, "A Repair")
			if repA.Count(reconcile.ActionRebuilt) != 1 {
				t.Errorf("A: %+v; want the SKU rebuilt", repA.Corrections)
			}
		}
		o := stock.Order{ID: "big", Items: []stock.Item{{SKU: sku, Qty: 2000}}}
		w.must(w.flow.Deduct(w.ctx, o), "Deduct")
		w.must(w.flow.Confirm(w.ctx, o.ID), "Confirm")
		w.must(w.gate.Revert(w.ctx, o.ID), "refund at the gate") // tiered's first step
	}}
	b, err := reconcile.New(g, w.record, reconcile.Config{Clock: w.clock})
	w.must(err, "New B")
	repB, errB := b.Repair(w.ctx, []string{sku})
	gl, rl := w.levels(sku)
	t.Logf("B rebuilds %v; B: %+v, %v; gate %d record %d", g.outcomes, repB.Corrections, errB, gl.Available, rl.Available)
	if len(g.outcomes) != 1 || g.outcomes[0] != redisstock.Exists {
		t.Fatalf("B's rebuild outcomes %v; want [Exists]", g.outcomes)
	}
	w.must(w.record.Revert(w.ctx, "big"), "refund at the record") // tiered's second step

	rep, err := w.rec.Repair(w.ctx, []string{sku})
	gl, rl = w.levels(sku)
	t.Logf("next pass: %+v, %v; gate %d record %d", rep.Corrections, err, gl.Available, rl.Available)
	if err != nil {
		t.Errorf("next pass returned %v; want nil", err)
	}
	if gl.Available != 5000 || rl.Available != 5000 {
		t.Errorf("after the refund and a pass: gate %d, record %d; want both 5000", gl.Available, rl.Available)
	}
}
