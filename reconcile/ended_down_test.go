package reconcile_test

import (
	"context"
	"testing"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// downAfter is a gate whose RevertHeld fails as an unreachable Redis does
// after n went through.
type downAfter struct {
	reconcile.Gate
	n int
}

func (g *downAfter) RevertHeld(ctx context.Context, id string) (stock.State, error) {
	if g.n == 0 {
		return stock.StateUnknown, errDown
	}
	g.n--
	return g.Gate.RevertHeld(ctx, id)
}

// Every unit a pass ends at the gate is reported once (Correction.Ended,
// observe.Correction.Ended), by this pass or the next, even when the pass
// stops on an error after it: Redis goes down after the pass ended o1 and
// before o2. The pass returns the error and reports o1's end (ActionFailed,
// Ended 1); the next pass finds o1 ended at both tiers and reports o2.
func TestEndsBeforeRedisWentDownAreReported(t *testing.T) {
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
