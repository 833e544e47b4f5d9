package reconcile_test

import (
	"testing"

	"github.com/stockguard/stockguard/reconcile"
)

// Pass B reads "no state, target 10" and stalls; pass A rebuilds, 4 units
// are taken through the flow, and Redis loses its data again. B's rebuild,
// computed before those orders, must not create a state that admits more
// than the record can take.
func TestStaleRebuildAfterASecondFlush(t *testing.T) {
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
			w.flush()
		}}
		_, _ = w.parked(g, reconcile.Config{}).Repair(w.ctx, []string{"a"})
		gl, err := w.gate.Levels(w.ctx, "a")
		if err != nil {
			return // not rebuilt by B: the next pass rebuilds it from a fresh reading
		}
		_, rl := w.levels("a")
		if gl.Available > rl.Available {
			t.Fatalf("gate available %d, record available %d after pass B: the gate admits more than the record can take", gl.Available, rl.Available)
		}
	})
}
