package reconcile_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

func TestWarmUpOverwritesAndRefusesLiveHoldsUnlessForced(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		// Listed at the record alone, as the tiered flow lists it: the
		// record's hold time is the gate's 1m plus the default grace.
		w.must(w.record.PutOnSale(w.ctx, stock.Listing{SKU: "a", Units: 30, PerUserLimit: 2, HoldTTL: w.flow.RecordHold(time.Minute)}), "record a")
		w.must(w.record.PutOnSale(w.ctx, stock.Listing{SKU: "b", Units: 8}), "record b")
		w.must(w.gate.PutOnSale(w.ctx, stock.Listing{SKU: "b", Units: 99}), "stale gate b")

		rep, err := w.rec.WarmUp(w.ctx, nil, false)
		w.must(err, "WarmUp")
		if rep.Count(reconcile.ActionRebuilt) != 2 || rep.Count(reconcile.ActionMismatch) != 0 {
			t.Fatalf("warm-up report %+v, want 2 written, no mismatch", rep.Corrections)
		}
		g, _ := w.levels("a")
		if g.Available != 30 || g.PerUserLimit != 2 || g.HoldTTL != time.Minute {
			t.Errorf("a in Redis %+v, want 30 units, limit 2, hold 1m", g)
		}
		if g, _ := w.levels("b"); g.Available != 8 {
			t.Errorf("b in Redis %d, want 8 (overwritten)", g.Available)
		}

		// A live hold in Redis the database has not recorded; the database
		// gains units meanwhile.
		w.must(w.gate.Deduct(w.ctx, stock.Order{ID: "live", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 2}}}), "live hold")
		w.must(w.record.Restock(w.ctx, stock.Restock{OpID: "op-14", SKU: "a", Units: 10}), "restock record")
		rep, err = w.rec.WarmUp(w.ctx, []string{"a", "b"}, false)
		if !errors.Is(err, reconcile.ErrLiveHolds) || rep.Count(reconcile.ActionRefused) != 1 {
			t.Fatalf("WarmUp with a live hold: %v, %+v; want a refusal", err, rep.Corrections)
		}
		if g, _ := w.levels("a"); g.Available != 28 {
			t.Errorf("refused SKU changed: Redis %d, want 28", g.Available)
		}
		rep, err = w.rec.WarmUp(w.ctx, []string{"a"}, true)
		w.must(err, "forced WarmUp")
		want := reconcile.Correction{SKU: "a", Action: reconcile.ActionRebuilt, Before: 28, After: 38, Delta: 10, Record: 40, InFlight: 2}
		checkCorrection(t, rep.Corrections, want)
		if g, _ := w.levels("a"); g.Available != 38 {
			t.Errorf("forced: Redis %d, want 40 - 2 in flight = 38", g.Available)
		}
		rep, err = w.rec.Repair(w.ctx, []string{"a", "b"})
		if err != nil || len(rep.Corrections) != 0 {
			t.Errorf("a repair after warm-up: %v, %+v; want agreement", err, rep.Corrections)
		}
	})
}

func TestRunNoticesAFlush(t *testing.T) {
	w := newWorld(t, pairs()[0], reconcile.Config{WatchInterval: time.Millisecond, Interval: time.Hour})
	w.sale("a", 5)
	rebuilt := make(chan reconcile.Correction, 8)
	rec, err := reconcile.New(w.gate, w.record, reconcile.Config{WatchInterval: time.Millisecond, Interval: time.Hour,
		OnCorrection: func(c reconcile.Correction) { rebuilt <- c }})
	w.must(err, "New")
	ctx, cancel := w.ctxCancel()
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	for !w.marked() { // the first full pass marks Redis
		time.Sleep(time.Millisecond)
	}
	w.flush()
	c := <-rebuilt
	cancel()
	<-done
	if c.Action != reconcile.ActionRebuilt || c.SKU != "a" || c.After != 5 {
		t.Errorf("after the flush Run reported %+v, want a rebuilt with 5", c)
	}
}
