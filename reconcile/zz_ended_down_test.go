package reconcile_test

import (
	"context"
	"testing"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/reconcile"
)

// downAfter is a gate whose Revert fails as an unreachable Redis does
// after n Reverts went through.
type downAfter struct {
	reconcile.Gate
	n int
}

func (g *downAfter) Revert(ctx context.Context, id string) error {
	if g.n == 0 {
		return errDown
	}
	g.n--
	return g.Gate.Revert(ctx, id)
}

// Promise (Correction.Ended, observe.Correction.Ended: the units the pass
// reverted at the gate; endAtGate: an error comes "after the ends already
// made (each one final and right)"): every unit a pass ends at the gate is
// reported once, by this pass or the next. Redis goes down after the
// pass ended o1 and before o2: the pass returns the error and reports
// nothing of o1's end, and the next pass finds o1 ended at both tiers and
// reports only o2. One of the two units ended is never reported (stockctl,
// OnCorrection, the observer, the metrics).
func TestZZEndsBeforeRedisWentDownAreReported(t *testing.T) {
	var ended int64
	obs := observe.Observer{Correction: func(c observe.Correction) { ended += c.Ended }}
	w := newWorld(t, pairs()[0], reconcile.Config{Observer: obs})
	w.sale("phone", 5)
	for _, id := range []string{"o1", "o2"} {
		w.must(w.flow.Deduct(w.ctx, order(id, "phone", 1)), "Deduct "+id)
		w.must(w.record.Revert(w.ctx, id), "record Revert "+id+" (at the record alone)")
	}
	rec, err := reconcile.New(&downAfter{Gate: w.gate, n: 1}, w.record, reconcile.Config{Observer: obs})
	w.must(err, "New")
	if _, err := rec.Repair(w.ctx, []string{"phone"}); err == nil {
		t.Fatal("Repair with Redis down after one end: nil error")
	}
	rep, err := w.rec.Repair(w.ctx, []string{"phone"}) // Redis back
	w.must(err, "Repair")
	t.Logf("second pass: %+v", rep)
	if ended != 2 {
		t.Errorf("units reported ended: %d, want 2 (o1 and o2, one unit each, both ended at the gate)", ended)
	}
}
