package systemtest

import (
	"context"
	"fmt"
	"slices"
)

// quiesceAttempts bounds the final reclaims, restocks and reconcile passes.
const quiesceAttempts = 10

// quiesce brings the flow to rest, with no more faults, and checks that
// it settled: nothing held, every restock applied once, no drift.
func (r *runner) quiesce() {
	r.cfg.FaultRate = -1
	next := func(what string) {
		r.step++
		r.line = fmt.Sprintf("#%d %s quiesce: %s", r.step, r.clockText(), what)
	}
	for len(r.parked) > 0 && !r.stop {
		next("")
		r.resumeCall(0, r.rng.IntN(4) != 0)
		r.trace(r.line)
		r.checkState()
	}
	if r.stop {
		return
	}
	// What nodes that died left to lapse (a gate's transfer leases, which
	// hold off every correction of their SKU) lapses first.
	if r.cfg.Lapse != nil {
		next("lapse")
		if err := r.cfg.Lapse(r.ctx); err != nil {
			r.violate(CheckNotQuiescent, "what nodes that died left did not lapse: %v", err)
		}
		r.trace(r.line)
		if r.stop {
			return
		}
	}
	// A gate that lost its data is rebuilt first, so the restocks still
	// in doubt can be retried (within the reconciler's restock window, as
	// a caller would); then every hold expires and is reclaimed, and a
	// last pass must find nothing left to repair.
	for _, what := range []string{"repair", "restocks", "tick", "reclaim", "repair"} {
		if what == "tick" {
			next(fmt.Sprintf("tick +%v", r.cfg.Settle))
			r.cfg.Clock.Advance(r.cfg.Settle)
			r.trace(r.line)
			continue
		}
		if !r.settle(what, next) {
			return
		}
	}
	next("final check")
	v, err := r.read()
	if err != nil {
		r.violate(CheckNotQuiescent, "final reading: %v", err)
		r.trace(r.line)
		return
	}
	r.checkView(v)
	for _, sku := range r.skus {
		g, rec := v.gate[sku], v.rec[sku]
		ok, doubt := r.restocked(sku)
		if doubt != 0 {
			r.violate(CheckNotQuiescent, "%s: %d restocked units still in doubt", sku, doubt)
		}
		if total := rec.Available + rec.Held + rec.Sold; total != r.put[sku]+ok {
			r.violate(CheckConservation, "%s: at rest the record has %d units, %d were put on sale and restocked", sku, total, r.put[sku]+ok)
		}
		if rec.Held != 0 {
			r.violate(CheckHeldPastDue, "%s: at rest the record still holds %d units", sku, rec.Held)
		}
		if !v.gateOK[sku] {
			r.violate(CheckDrift, "%s: the gate has no state after the final reconcile", sku)
			continue
		}
		if g.Held != 0 {
			r.violate(CheckHeldPastDue, "%s: at rest the gate still holds %d units", sku, g.Held)
		}
		if g.Available != rec.Available {
			r.violate(CheckDrift, "%s: after the final reconcile gate available %d, record available %d, nothing in flight", sku, g.Available, rec.Available)
		}
	}
	r.checkOrphans()
	r.line += fmt.Sprintf(" gate/record available %s", r.levelsText(v))
	r.trace(r.line)
	if !r.stop {
		r.checkMemory(next)
	}
}

// settle repeats one quiescence action until it succeeds.
func (r *runner) settle(what string, next func(string)) bool {
	for attempt := 1; attempt <= quiesceAttempts; attempt++ {
		next(what)
		var err error
		switch what {
		case "repair":
			r.res.Counts["repairs"]++
			c := &call{kind: "repair", node: -1, ctl: newCtl(), desc: "repair"}
			skus := slices.Clone(r.skus)
			r.launch(c, func(ctx context.Context) result { return result{err: r.cfg.Repair(ctx, skus)} })
			err = r.lastErr
		case "restocks":
			for _, rs := range r.restocks {
				if !rs.ok && !rs.refused && rs.sent {
					r.sendRestock(rs)
				}
			}
			if ok, _ := r.pending(); !ok {
				err = fmt.Errorf("restocks still in doubt")
			}
		case "reclaim":
			r.res.Counts["reclaims"]++
			c := &call{kind: "reclaim", node: 0, ctl: newCtl(), desc: "n0 reclaim"}
			r.launch(c, func(ctx context.Context) result {
				got, err := r.flows[0].ReclaimExpired(ctx, reclaimLimit)
				return result{err: err, got: got}
			})
			err = r.lastErr
			if err == nil && r.lastGot >= reclaimLimit {
				err = fmt.Errorf("more due")
			}
		}
		r.trace(r.line)
		if r.stop {
			return false
		}
		r.checkState()
		if r.stop {
			return false
		}
		if err == nil {
			return true
		}
	}
	r.step++
	r.violate(CheckNotQuiescent, "%s kept failing at rest", what)
	r.trace(fmt.Sprintf("#%d %s failed %d times", r.step, what, quiesceAttempts))
	return false
}

// pending reports whether every restock sent was told nil.
func (r *runner) pending() (bool, int) {
	n := 0
	for _, rs := range r.restocks {
		if rs.sent && !rs.ok && !rs.refused {
			n++
		}
	}
	return n == 0, n
}

func (r *runner) levelsText(v view) string {
	s := ""
	for _, sku := range r.skus {
		g := "-"
		if v.gateOK[sku] {
			g = fmt.Sprint(v.gate[sku].Available)
		}
		s += fmt.Sprintf(" %s %s/%d", sku, g, v.rec[sku].Available)
	}
	return s
}
