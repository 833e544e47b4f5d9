package reconcile_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// Orders ended through the flow, and cancelled at the record alone (a
// node whose breaker is open), while two nodes' passes revert at the gate
// what the record returned, are each in one state at both tiers, each
// unit returned once: once traffic stops and a pass runs, the gate's
// available is the record's and every order's state at the gate is the
// record's. (An order paid at the record alone is left in flight at the
// gate until its deadline, a documented limit: it is not in the mix.)
func TestPassesRacingFlowAndRecordAloneCancelsLeaveTheTiersAgreeing(t *testing.T) {
	forEach(t, func(t *testing.T, p pair) {
		w := newWorld(t, p, reconcile.Config{})
		w.sale("phone", 200)
		other, err := reconcile.New(w.gate, w.record, reconcile.Config{})
		w.must(err, "New")
		fb := w.flow.Fallback()
		var stop atomic.Bool
		var wg sync.WaitGroup
		for _, r := range []*reconcile.Reconciler{w.rec, other} {
			wg.Go(func() {
				for !stop.Load() {
					if _, err := r.Repair(w.ctx, []string{"phone"}); err != nil && !errors.Is(err, reconcile.ErrUnresolved) {
						t.Errorf("Repair: %v", err)
						return
					}
				}
			})
		}
		const n = 120
		var ow sync.WaitGroup
		for g := range 4 {
			ow.Go(func() {
				rnd := rand.New(rand.NewPCG(uint64(g), 7))
				for i := g; i < n; i += 4 {
					id := fmt.Sprintf("o%d", i)
					if err := w.flow.Deduct(w.ctx, order(id, "phone", 1+int64(i%2))); err != nil {
						t.Errorf("Deduct %s: %v", id, err)
						continue
					}
					switch rnd.IntN(5) {
					case 0:
						_ = w.flow.Confirm(w.ctx, id)
					case 1:
						_ = w.flow.Revert(w.ctx, id)
					case 2:
						_ = fb.Revert(w.ctx, id)
					case 3:
						_ = fb.Confirm(w.ctx, id)
						_ = w.flow.Revert(w.ctx, id) // a refund through the flow
					}
				}
			})
		}
		ow.Wait()
		stop.Store(true)
		wg.Wait()
		for range 3 {
			if _, err := w.rec.Repair(w.ctx, []string{"phone"}); err != nil {
				t.Fatal(err)
			}
		}
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("o%d", i)
		}
		gi, err := w.gate.Orders(w.ctx, ids)
		w.must(err, "gate Orders")
		ri, err := w.record.Orders(w.ctx, ids)
		w.must(err, "record Orders")
		var held int64
		for i := range ids {
			gs, rs := gi[i].State, ri[i].State
			if gs.Takes() != rs.Takes() || (gs == stock.StateConfirmed) != (rs == stock.StateConfirmed) {
				t.Errorf("%s: gate %v, record %v", ids[i], gs, rs)
			}
		}
		g, r := w.levels("phone")
		_ = held
		if g.Available != r.Available {
			t.Errorf("gate %+v, record %+v: want the same available", g, r)
		}
	})
}
