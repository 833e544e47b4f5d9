package reconcile_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// restockingGate restocks its SKU through the tiered flow (record, then
// gate: an administrative write that moves the gate's fence) before every
// Relist: the SKU keeps changing under administrative writes for as long
// as WarmUp tries to write it.
type restockingGate struct {
	reconcile.Gate
	w   *world
	sku string
	n   int
}

func (g *restockingGate) Relist(ctx context.Context, rls []redisstock.Relist) ([]redisstock.Outcome, error) {
	g.n++
	g.w.must(g.w.flow.Restock(ctx, stock.Restock{OpID: "busy-" + strconv.Itoa(g.n), SKU: g.sku, Units: 1}), "Restock")
	return g.Gate.Relist(ctx, rls)
}

// WarmUp's nil means every SKU is in agreement: a SKU out of agreement
// (gate 10, record 12) that an administrative write moves before each of
// WarmUp's writes, for all of Config.MaxAttempts, is reported ActionStale
// and nothing is written, so WarmUp's error must wrap ErrUnresolved, as
// it does for a SKU it left out of agreement any other way.
func TestWarmUpStaleSKUIsAnError(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.sale("a", 10)
		w.must(w.record.PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 12}), "record-only PutOnSale")
		g := &restockingGate{Gate: w.gate, w: w, sku: "a"}
		rec, err := reconcile.New(g, w.record, reconcile.Config{Clock: w.clock, MaxAttempts: 3})
		w.must(err, "New")
		rep, err := rec.WarmUp(w.ctx, []string{"a"}, false)
		gl, rl := w.levels("a")
		if g.n != 3 || rep.Count(reconcile.ActionStale) != 1 || len(rep.Corrections) != 1 {
			t.Fatalf("WarmUp made %d writes, reported %+v; want 3 writes refused and the SKU ActionStale", g.n, rep.Corrections)
		}
		if gl.Available != 13 || rl.Available != 15 {
			t.Fatalf("gate %d, record %d; want 13, 15 (three restocks, nothing written)", gl.Available, rl.Available)
		}
		if !errors.Is(err, reconcile.ErrUnresolved) {
			t.Errorf("WarmUp returned %v with %q left out of agreement (gate %d, record %d); want an error wrapping ErrUnresolved",
				err, "a", gl.Available, rl.Available)
		}
		// nil skus (every SKU of the record) says the same.
		g.n = 100
		if _, err := rec.WarmUp(w.ctx, nil, false); !errors.Is(err, reconcile.ErrUnresolved) {
			t.Errorf("WarmUp of every SKU returned %v; want an error wrapping ErrUnresolved", err)
		}
	})
}

// A SKU on sale at the gate that the database does not have is out of
// agreement (the gate sells what the record cannot record): WarmUp
// reports it ActionFailed (stock.ErrUnknownSKU) and, as for any SKU it
// leaves out of agreement, its error wraps ErrUnresolved; a repair pass
// says the same of it.
func TestWarmUpOfASKUTheRecordLacksIsAnError(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.sale("a", 10)
		w.must(w.gate.PutOnSale(w.ctx, stock.Listing{SKU: "ghost", Units: 5}), "gate-only PutOnSale")
		rep, err := w.rec.WarmUp(w.ctx, []string{"a", "ghost"}, false)
		if rep.Count(reconcile.ActionFailed) != 1 || rep.Count(reconcile.ActionRebuilt) != 1 || len(rep.Corrections) != 2 {
			t.Fatalf("WarmUp reported %+v; want a written, ghost failed", rep.Corrections)
		}
		if !errors.Is(err, reconcile.ErrUnresolved) {
			t.Errorf("WarmUp returned %v with %q on sale at the gate alone; want an error wrapping ErrUnresolved", err, "ghost")
		}
		if _, err := w.rec.Repair(w.ctx, []string{"ghost"}); !errors.Is(err, reconcile.ErrUnresolved) {
			t.Errorf("Repair returned %v; want an error wrapping ErrUnresolved", err)
		}
	})
}
