package systemtest

import "context"

// CheckOrphan is the at-rest check of the gate's per-order data: every
// directory entry, line record and hold is ended or live for a reason the
// gate names (redisstock.Store.Audit), none an orphan.
const CheckOrphan = "orphan"

// auditor is a gate that reports, at rest, the per-order items it stores
// that are neither ended nor live for a reason (redisstock.Store.Audit).
type auditor interface {
	Audit(ctx context.Context) (orphans []string, stored int, err error)
}

// checkOrphans runs the gate's audit at rest, if the gate has one.
func (r *runner) checkOrphans() {
	a, ok := r.cfg.Gate.(auditor)
	if !ok {
		return
	}
	orphans, _, err := a.Audit(r.ctx)
	if err != nil {
		r.violate(CheckNotQuiescent, "the gate's audit at rest: %v", err)
	}
	for _, o := range orphans {
		r.violate(CheckOrphan, "at rest: %s", o)
	}
}
