package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// WarmUp puts SKUs on sale in Redis from the database before a sale:
// each SKU's per-user limit becomes the database's, its hold time the one
// Config.GateHold maps the database's to, and its available count the
// database's less the units Redis holds for orders the database has not
// recorded (the database's count when Redis holds nothing). nil skus means
// every SKU of the database.
//
// A SKU's correction is computed as a repair pass computes it: from two
// readings, the second bounding a correction upward (see the package
// doc), so an order sold between a reading of the database and one of
// Redis never raises Redis above what the database can take.
//
// No write is blind. A SKU Redis has no state for is created only if it
// still has none (redisstock Store.Rebuild); a SKU on sale gets its
// correction and settings only if its fence is still the one read and,
// unless force is true, it has no live holds at the instant of the write
// (redisstock Store.Relist, one atomic script): otherwise it is read
// again (Config.MaxAttempts; then ActionStale), or, with live holds, not
// written (ActionRefused, and the error wraps ErrLiveHolds). Restocks in
// flight are completed at Redis as a repair pass does. After writing,
// WarmUp reads every written SKU again from both sides and reports any that
// is not in agreement (ActionMismatch): a repair pass fixes it. Every
// written SKU is reported as ActionRebuilt. Config.DryRun makes it report
// what it would write (ActionDryRun) and write nothing.
//
// A nil error means every SKU is in agreement. A SKU left out of
// agreement makes the error wrap ErrUnresolved, the Report saying which:
// ActionMismatch, ActionStale (it kept changing under administrative
// writes for Config.MaxAttempts, got a state from another writer while
// the last attempt rebuilt it, or the last attempt rebuilt it beside
// buckets that lived, with their units) or ActionFailed (the database
// does not have it, stock.ErrUnknownSKU, or the gate refused a restock in
// flight; see Correction.Err).
func (r *Reconciler) WarmUp(ctx context.Context, skus []string, force bool) (Report, error) {
	if skus != nil {
		return r.warmUp(ctx, skus, force)
	}
	var rep Report
	var errs []error
	err := r.eachPage(ctx, func(page []string) error {
		got, err := r.warmUp(ctx, page, force)
		rep.add(got)
		if err != nil && !errors.Is(err, ErrLiveHolds) && !errors.Is(err, ErrUnresolved) {
			return err
		}
		if err != nil && len(errs) < 2 {
			errs = append(errs, err)
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	return rep, errors.Join(errs...)
}

func (r *Reconciler) warmUp(ctx context.Context, skus []string, force bool) (Report, error) {
	var rep Report
	refused, mismatched := 0, 0
	for start := 0; start < len(skus); start += r.cfg.BatchSize {
		batch := skus[start:min(start+r.cfg.BatchSize, len(skus))]
		rep.Checked += len(batch)
		var put []*finding
		for attempt := 1; len(batch) > 0; attempt++ {
			last := attempt >= r.cfg.MaxAttempts
			began := time.Now()
			fs, again, err := r.examineTwice(ctx, batch, attempt)
			if err != nil {
				return rep, err
			}
			var rebuild, relist []*finding
			for i := range fs {
				f := &fs[i]
				switch {
				case f.err != nil:
					r.note(&rep, f.correction(ActionFailed, f.err))
				case !f.rec.Exists:
					r.note(&rep, f.correction(ActionFailed, fmt.Errorf("reconcile: SKU %q: %w", f.sku, stock.ErrUnknownSKU)))
				case f.stale && !last:
					again = append(again, f.sku)
				case f.stale:
					r.note(&rep, f.correction(ActionStale, errStale(f.sku)))
				case f.gate.Held > 0 && !force:
					refused++
					r.note(&rep, f.correction(ActionRefused, liveHolds(f.sku, f.gate.Held)))
				case r.cfg.DryRun:
					r.note(&rep, f.correction(ActionDryRun, nil))
				case !f.gate.Exists:
					rebuild = append(rebuild, f)
				default:
					relist = append(relist, f)
				}
			}
			more, err := r.rebuildWarm(ctx, &rep, rebuild, &put, last, began)
			if err != nil {
				return rep, err
			}
			again = append(again, more...)
			more, n, err := r.relist(ctx, &rep, relist, force, &put, last)
			if err != nil {
				return rep, err
			}
			refused += n
			batch = append(again, more...)
		}
		if len(put) == 0 {
			continue
		}
		n, err := r.verify(ctx, &rep, put)
		if err != nil {
			return rep, err
		}
		mismatched += n
	}
	var errs []error
	if refused > 0 {
		errs = append(errs, fmt.Errorf("%w: %d SKUs refused", ErrLiveHolds, refused))
	}
	// A SKU that stayed stale (busy with administrative writes, or
	// rebuilt beside buckets that lived, on the last attempt) or failed
	// (unknown to the database, a restock in flight the gate refused) is
	// as far out of agreement as a mismatched one.
	if left := mismatched + rep.Count(ActionStale) + rep.Count(ActionFailed); left > 0 {
		errs = append(errs, unresolved(left))
	}
	return rep, errors.Join(errs...)
}

// rebuildWarm creates the gate state of SKUs Redis has none for, as a
// repair pass does (rebuild: never overwriting a state another writer
// created meanwhile; waiting for the rebuild of another reader that took
// the claim since, rather than claiming again at once), and appends the
// created ones to put. It returns the SKUs to read again; one it rebuilt
// beside buckets that lived on the last attempt is noted ActionStale (on
// sale with their units: not in agreement).
func (r *Reconciler) rebuildWarm(ctx context.Context, rep *Report, fs []*finding, put *[]*finding, last bool, began time.Time) ([]string, error) {
	applied, again, claimed, partial, err := r.rebuild(ctx, rep, fs, func(string) bool { return last })
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		switch {
		case !slices.Contains(partial, f.sku):
		case last: // on sale with its living buckets' units: not in agreement
			r.note(rep, f.correction(ActionStale, errPartial(f.sku)))
		default:
			again = append(again, f.sku)
		}
	}
	*put = append(*put, applied...)
	if len(claimed) > 0 {
		if err := r.awaitRebuild(ctx, claimed, time.Since(began)); err != nil {
			return nil, err
		}
	}
	return append(again, claimed...), nil
}

// relist writes the record's count and settings over SKUs on sale in
// Redis, each only if its fence is the one read and (unless force) it has
// no live holds at the instant of the write (redisstock Store.Relist), then
// completes their restocks in flight. It returns the SKUs to read again
// and how many it refused for live holds.
func (r *Reconciler) relist(ctx context.Context, rep *Report, fs []*finding, force bool, put *[]*finding, last bool) (again []string, refused int, err error) {
	if len(fs) == 0 {
		return nil, 0, nil
	}
	rls := make([]redisstock.Relist, len(fs))
	for i, f := range fs {
		hold, maxHold := r.gateHolds(f)
		rls[i] = redisstock.Relist{SKU: f.sku, Fence: f.fence, Delta: f.delta(), PerUserLimit: f.rec.PerUserLimit,
			HoldTTL: hold, MaxHoldTTL: maxHold, Force: force}
	}
	got, err := r.gate.Relist(ctx, rls)
	if err != nil {
		return nil, 0, fmt.Errorf("reconcile: warm up: %w", err)
	}
	for i, f := range fs {
		switch {
		case got[i] == redisstock.Applied:
			noted, err := r.settle(ctx, rep, f, ActionRebuilt, &again, last)
			if err != nil {
				return nil, 0, err
			}
			if noted {
				*put = append(*put, f)
			}
		case got[i] == redisstock.HasHolds:
			refused++
			r.note(rep, f.correction(ActionRefused, fmt.Errorf("%w: %q holds units", ErrLiveHolds, f.sku)))
		case !last:
			again = append(again, f.sku) // moved, lost or sold since the reading
		default:
			r.note(rep, f.correction(ActionStale, errStale(f.sku)))
		}
	}
	return again, refused, nil
}

func liveHolds(sku string, held int64) error {
	return fmt.Errorf("%w: %q holds %d units", ErrLiveHolds, sku, held)
}

// verify reads the SKUs just written and reports those not in agreement.
// It reads as a repair pass's second reading does (examineBounded): an
// order sold between its reading of the database and of Redis would
// otherwise show a rise no pass would make, and a mismatch that is not.
func (r *Reconciler) verify(ctx context.Context, rep *Report, put []*finding) (int, error) {
	skus := make([]string, len(put))
	for i, f := range put {
		skus[i] = f.sku
	}
	fs, err := r.examineBounded(ctx, skus)
	if err != nil {
		return 0, fmt.Errorf("reconcile: verify: %w", err)
	}
	n := 0
	for i := range fs {
		f := &fs[i]
		settings := !r.settingsDiffer(f)
		if f.err == nil && f.gate.Exists && f.delta() == 0 && settings {
			continue
		}
		n++
		err := f.err
		if err == nil && !settings {
			err = fmt.Errorf("reconcile: SKU %q: settings differ after warm-up", f.sku)
		}
		r.note(rep, f.correction(ActionMismatch, err))
	}
	return n, nil
}
