package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockguard/stockguard/stock"
)

// WarmUp puts SKUs on sale in Redis from the database before a sale:
// each SKU's available count, per-user limit and hold time are overwritten
// with the database's (its available count less the units Redis holds for
// orders the database has not recorded, which is the database's count
// when Redis holds nothing). nil skus means every SKU of the database.
//
// A SKU with live holds in Redis is not overwritten (ActionRefused, and the
// error wraps ErrLiveHolds) unless force is true: an overwrite while orders
// are being taken is a blind write. After writing, WarmUp reads every SKU
// again from both sides and reports any that is not in agreement
// (ActionMismatch; the error wraps ErrUnresolved): a repair pass fixes it.
// Every written SKU is reported as ActionRebuilt. Config.DryRun makes it
// report what it would write (ActionDryRun) and write nothing.
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
		fs, err := r.examine(ctx, batch)
		if err != nil {
			return rep, err
		}
		rep.Checked += len(batch)
		var ls []stock.Listing
		var put []*finding
		for i := range fs {
			f := &fs[i]
			switch {
			case f.err != nil:
				r.note(&rep, f.correction(ActionFailed, f.err))
			case !f.rec.Exists:
				r.note(&rep, f.correction(ActionFailed, fmt.Errorf("reconcile: SKU %q: %w", f.sku, stock.ErrUnknownSKU)))
			case f.gate.Held > 0 && !force:
				refused++
				r.note(&rep, f.correction(ActionRefused, fmt.Errorf("%w: %q holds %d units", ErrLiveHolds, f.sku, f.gate.Held)))
			case r.cfg.DryRun:
				r.note(&rep, f.correction(ActionDryRun, nil))
			default:
				put = append(put, f)
				ls = append(ls, stock.Listing{SKU: f.sku, Units: f.target, PerUserLimit: f.rec.PerUserLimit, HoldTTL: r.cfg.GateHold(f.rec.HoldTTL)})
			}
		}
		if len(ls) == 0 {
			continue
		}
		if err := r.gate.PutOnSaleMany(ctx, ls); err != nil {
			return rep, fmt.Errorf("reconcile: warm up: %w", err)
		}
		for _, f := range put {
			r.note(&rep, f.correction(ActionRebuilt, nil))
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
	if mismatched > 0 {
		errs = append(errs, unresolved(mismatched))
	}
	return rep, errors.Join(errs...)
}

// verify reads the SKUs just written and reports those not in agreement.
func (r *Reconciler) verify(ctx context.Context, rep *Report, put []*finding) (int, error) {
	skus := make([]string, len(put))
	for i, f := range put {
		skus[i] = f.sku
	}
	fs, err := r.examine(ctx, skus)
	if err != nil {
		return 0, fmt.Errorf("reconcile: verify: %w", err)
	}
	n := 0
	for i := range fs {
		f := &fs[i]
		settings := f.gate.PerUserLimit == f.rec.PerUserLimit && f.gate.HoldTTL == r.cfg.GateHold(f.rec.HoldTTL)
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
