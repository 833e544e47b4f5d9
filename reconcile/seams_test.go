package reconcile_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// hookedGate is a gate wrapped the way a user wraps one (metrics, tracing):
// it forwards every call, and runs a hook once before the first Adjust,
// Rebuild or Relist, the moment a pass stalls between its reading and its
// write.
type hookedGate struct {
	reconcile.Gate
	beforeAdjust, beforeRebuild, beforeRelist func()
}

func once(f *func()) {
	if *f != nil {
		g := *f
		*f = nil
		g()
	}
}

func (g *hookedGate) Adjust(ctx context.Context, sku string, f redisstock.Fence, delta int64) (bool, error) {
	once(&g.beforeAdjust)
	return g.Gate.Adjust(ctx, sku, f, delta)
}

func (g *hookedGate) Rebuild(ctx context.Context, rs []redisstock.Rebuild) ([]redisstock.Outcome, error) {
	once(&g.beforeRebuild)
	return g.Gate.Rebuild(ctx, rs)
}

func (g *hookedGate) Relist(ctx context.Context, rls []redisstock.Relist) ([]redisstock.Outcome, error) {
	once(&g.beforeRelist)
	return g.Gate.Relist(ctx, rls)
}

// parked returns a second reconciler on w's stores whose gate is g.
func (w *world) parked(g *hookedGate, cfg reconcile.Config) *reconcile.Reconciler {
	w.t.Helper()
	g.Gate = w.gate
	r, err := reconcile.New(g, w.record, cfg)
	w.must(err, "New")
	return r
}

// Defect 1: a pass computes +5, parks before its Adjust; Redis is flushed
// and another pass rebuilds the SKU at 15 (the same epoch as before the
// flush). The parked Adjust must be refused: its fence is from the state
// the flush destroyed.
func TestParkedAdjustRefusedAfterFlushAndRebuild(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.sale("a", 10)
		w.must(w.record.PutOnSale(w.ctx, w.flow.RecordListing(stock.Listing{SKU: "a", Units: 15})), "record-only PutOnSale") // drift +5
		var rebuilt reconcile.Report
		g := &hookedGate{beforeAdjust: func() {
			w.flush()
			var err error
			rebuilt, err = w.rec.Repair(w.ctx, []string{"a"})
			w.must(err, "the other pass")
		}}
		rep, err := w.parked(g, reconcile.Config{}).Repair(w.ctx, []string{"a"})
		w.must(err, "the parked pass")
		if rebuilt.Count(reconcile.ActionRebuilt) != 1 {
			t.Fatalf("the other pass %+v, want a rebuild", rebuilt.Corrections)
		}
		if gl, rl := w.levels("a"); gl.Available != 15 || rl.Available != 15 {
			t.Fatalf("gate %d, record %d after the parked Adjust; want 15, 15 (the +5 was computed before the flush)", gl.Available, rl.Available)
		}
		if n := rep.Count(reconcile.ActionCorrected); n != 0 || rep.InAgreement != 1 {
			t.Errorf("the parked pass %+v: want its Adjust refused and the SKU read again, in agreement", rep)
		}
	})
}

// Defect 2: pass B reads "no state, target 10" and stalls; pass A
// rebuilds, 4 units are taken; B's rebuild must not overwrite the live
// holds.
func TestSecondRebuildLeavesLiveHolds(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.sale("a", 10)
		w.flush()
		g := &hookedGate{beforeRebuild: func() {
			rep, err := w.rec.Repair(w.ctx, []string{"a"})
			w.must(err, "pass A")
			if rep.Count(reconcile.ActionRebuilt) != 1 {
				t.Fatalf("pass A %+v, want a rebuild", rep.Corrections)
			}
			for _, id := range []string{"o1", "o2", "o3", "o4"} {
				w.must(w.flow.Deduct(w.ctx, order(id, "a", 1)), "Deduct "+id)
			}
		}}
		rep, err := w.parked(g, reconcile.Config{}).Repair(w.ctx, []string{"a"})
		w.must(err, "pass B")
		gl, rl := w.levels("a")
		if gl.Available != 6 || gl.Held != 4 || rl.Available != 6 {
			t.Fatalf("gate %+v, record available %d after pass B; want gate 6 available, 4 held, record 6", gl, rl.Available)
		}
		if rep.Count(reconcile.ActionRebuilt) != 0 || rep.InAgreement != 1 {
			t.Errorf("pass B %+v: want its rebuild left alone and the SKU read again, in agreement", rep)
		}
	})
}

// Defect 3: a restock reaches the record, a pass runs, then the restock
// reaches the gate (stock/tiered's order). The pass must neither count
// the in-flight restock as drift nor let it be applied twice.
func TestRestockInFlightCountedOnce(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		rec, err := reconcile.New(w.gate, w.record, reconcile.Config{Clock: w.clock})
		w.must(err, "New")
		w.sale("a", 10)
		r := stock.Restock{OpID: "delivery-1", SKU: "a", Units: 5}
		w.must(w.record.Restock(w.ctx, r), "record step of the restock")
		rep, err := rec.Repair(w.ctx, []string{"a"})
		w.must(err, "Repair")
		want := reconcile.Correction{SKU: "a", Action: reconcile.ActionRestocked, Before: 10, After: 10, Record: 15, Restocking: 5}
		checkCorrection(t, rep.Corrections, want)
		w.must(w.gate.Restock(w.ctx, r), "gate step of the restock")
		if gl, rl := w.levels("a"); gl.Available != 15 || rl.Available != 15 {
			t.Fatalf("gate %d, record %d; want 15, 15", gl.Available, rl.Available)
		}
		// A caller retrying the whole restock adds nothing either.
		w.must(w.flow.Restock(w.ctx, r), "retried restock")
		rep, err = rec.Repair(w.ctx, []string{"a"})
		if gl, rl := w.levels("a"); err != nil || len(rep.Corrections) != 0 || gl.Available != 15 || rl.Available != 15 {
			t.Fatalf("after a retry: %v, %+v, gate %d, record %d; want agreement at 15", err, rep.Corrections, gl.Available, rl.Available)
		}
	})
}

// gateDuringRestock is a tiered gate that runs a hook as tiered.Restock
// reaches it, after the record step.
type gateDuringRestock struct {
	tiered.GateStore
	before func()
}

func (g *gateDuringRestock) Restock(ctx context.Context, r stock.Restock) error {
	once(&g.before)
	return g.GateStore.Restock(ctx, r)
}

// Defect 3 through stock/tiered: a repair pass runs between Restock's
// record step and its gate step.
func TestRepairInsideTieredRestock(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		rec, err := reconcile.New(w.gate, w.record, reconcile.Config{Clock: w.clock})
		w.must(err, "New")
		w.sale("a", 10)
		var rep reconcile.Report
		g := &gateDuringRestock{GateStore: w.gate, before: func() {
			rep, err = rec.Repair(w.ctx, []string{"a"})
			w.must(err, "Repair")
		}}
		flow := tiered.New(g, w.record, tiered.Config{Clock: w.clock})
		w.must(flow.Restock(w.ctx, stock.Restock{OpID: "delivery-1", SKU: "a", Units: 5}), "Restock")
		if gl, rl := w.levels("a"); gl.Available != 15 || rl.Available != 15 {
			t.Fatalf("gate %d, record %d after a pass inside Restock (%+v); want 15, 15", gl.Available, rl.Available, rep.Corrections)
		}
	})
}

// A rebuilt count includes the record's restocks of the window: the gate
// step of one of them, arriving after the rebuild, adds nothing.
func TestRebuildCountsRestocksInFlight(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		rec, err := reconcile.New(w.gate, w.record, reconcile.Config{Clock: w.clock})
		w.must(err, "New")
		w.sale("a", 10)
		r := stock.Restock{OpID: "delivery-1", SKU: "a", Units: 5}
		w.must(w.record.Restock(w.ctx, r), "record step of the restock")
		w.flush()
		rep, err := rec.Repair(w.ctx, []string{"a"})
		w.must(err, "Repair")
		if rep.Count(reconcile.ActionRebuilt) != 1 {
			t.Fatalf("report %+v, want a rebuild", rep.Corrections)
		}
		w.must(w.gate.Restock(w.ctx, r), "gate step of the restock, after the rebuild")
		if gl, rl := w.levels("a"); gl.Available != 15 || rl.Available != 15 {
			t.Fatalf("gate %d, record %d; want 15, 15", gl.Available, rl.Available)
		}
		// Outside the window a restock the gate never got is drift.
		w.must(w.record.Restock(w.ctx, stock.Restock{OpID: "delivery-2", SKU: "a", Units: 3}), "record-only restock")
		w.clock.Advance(redisstock.DefaultRetention/2 + time.Second) // the default window: half the gate's Retention
		rep, err = rec.Repair(w.ctx, []string{"a"})
		w.must(err, "Repair")
		checkCorrection(t, rep.Corrections, reconcile.Correction{SKU: "a", Action: reconcile.ActionCorrected,
			Before: 15, After: 18, Delta: 3, Record: 18})
	})
}

// WarmUp's refusal of a SKU with live holds is made at the write, not from
// the reading: a hold taken between them is neither overwritten nor lost.
func TestWarmUpRefusalIsAtomic(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		for _, force := range []bool{false, true} {
			w := newWorld(t, p, reconcile.Config{})
			w.sale("a", 10)
			w.must(w.record.PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 12}), "record-only PutOnSale")
			g := &hookedGate{beforeRelist: func() {
				w.must(w.flow.Deduct(w.ctx, order("o1", "a", 1)), "Deduct between the reading and the write")
			}}
			rep, err := w.parked(g, reconcile.Config{}).WarmUp(w.ctx, []string{"a"}, force)
			gl, rl := w.levels("a")
			switch {
			case !force && (!errors.Is(err, reconcile.ErrLiveHolds) || rep.Count(reconcile.ActionRefused) != 1 || gl.Available != 9):
				t.Errorf("WarmUp: %v, %+v, gate %+v; want a refusal with the gate left at 9", err, rep.Corrections, gl)
			case force && (err != nil || rep.Count(reconcile.ActionRebuilt) != 1 || gl.Available != rl.Available || gl.Available != 11):
				t.Errorf("forced WarmUp: %v, %+v, gate %d, record %d; want both at 11 (the hold taken meanwhile is not overwritten)",
					err, rep.Corrections, gl.Available, rl.Available)
			}
		}
	})
}

func TestNewRefusesNilAndUnsuitableStores(t *testing.T) {
	w := newWorld(t, pairs()[0], reconcile.Config{})
	for name, f := range map[string]func() (*reconcile.Reconciler, error){
		"nil gate": func() (*reconcile.Reconciler, error) { return reconcile.New(nil, w.record, reconcile.Config{}) },
		"typed nil gate": func() (*reconcile.Reconciler, error) {
			return reconcile.New((*redisstock.Store)(nil), w.record, reconcile.Config{})
		},
		"typed nil record": func() (*reconcile.Reconciler, error) {
			return reconcile.New(w.gate, (*nilRecord)(nil), reconcile.Config{})
		},
		"window past retention": func() (*reconcile.Reconciler, error) {
			return reconcile.New(w.gate, w.record, reconcile.Config{RestockWindow: redisstock.DefaultRetention})
		},
	} {
		if _, err := f(); !errors.Is(err, stock.ErrInvalid) {
			t.Errorf("New with a %s: %v, want ErrInvalid", name, err)
		}
	}
}

// nilRecord is a Record wrapper left nil by mistake.
type nilRecord struct{ reconcile.Record }
