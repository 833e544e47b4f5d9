package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// Reconciler keeps a Redis gate in agreement with its SQL record. It is
// safe for concurrent use, and any number of Reconcilers (on any number of
// nodes) may work on the same stores at once: each correction applies only
// to the Redis state it was computed from.
type Reconciler struct {
	gate   *redisstock.Store
	record *sqlstock.Store
	cfg    Config
}

// New returns a Reconciler that repairs gate (Redis) from record (the
// database, the source of truth). It does no I/O.
func New(gate *redisstock.Store, record *sqlstock.Store, cfg Config) (*Reconciler, error) {
	if gate == nil || record == nil {
		return nil, &stock.InvalidError{Field: "reconcile.New", Reason: "nil store"}
	}
	return &Reconciler{gate: gate, record: record, cfg: cfg.withDefaults()}, nil
}

// Repair reconciles the given SKUs: each SKU's Redis available count is
// brought to the database's available count minus the units Redis holds
// for orders the database has not recorded (plus the units the database
// still holds for orders Redis has returned), by a delta applied only if
// no administrative write touched the SKU since it was read. A SKU Redis
// has no state for is rebuilt from the database. Corrections larger than
// Config.MaxAutoFix are reported and left; with Config.DryRun nothing is
// changed.
//
// The error wraps ErrUnresolved when some SKU was left out of agreement
// (the Report says which), or is an infrastructure failure, after which
// the Report covers the batches done.
func (r *Reconciler) Repair(ctx context.Context, skus []string) (Report, error) {
	var rep Report
	left := 0
	for start := 0; start < len(skus); start += r.cfg.BatchSize {
		got, err := r.repairBatch(ctx, skus[start:min(start+r.cfg.BatchSize, len(skus))], r.cfg.DryRun)
		rep.add(got)
		if err != nil {
			return rep, err
		}
	}
	for _, c := range rep.Corrections {
		switch c.Action {
		case ActionLeft, ActionStale, ActionFailed:
			left++
		}
	}
	if left > 0 {
		return rep, unresolved(left)
	}
	return rep, nil
}

// RepairAll is Repair over every SKU of the database, read in pages of
// Config.BatchSize and repaired by Config.Workers goroutines; the order of
// the Report's corrections follows their completion. It first sets the gate's marker (redisstock
// Store.Mark), so that a flush from now on is noticed by Run.
func (r *Reconciler) RepairAll(ctx context.Context) (Report, error) {
	if !r.cfg.DryRun {
		if err := r.gate.Mark(ctx); err != nil {
			return Report{}, fmt.Errorf("reconcile: %w", err)
		}
	}
	var (
		rep  Report
		mu   sync.Mutex
		wg   sync.WaitGroup
		fail error
	)
	sem := make(chan struct{}, r.cfg.Workers)
	err := r.eachPage(ctx, func(skus []string) error {
		mu.Lock()
		failed := fail
		mu.Unlock()
		if failed != nil {
			return failed
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			got, err := r.Repair(ctx, skus)
			mu.Lock()
			defer mu.Unlock()
			rep.add(got)
			if err != nil && !errors.Is(err, ErrUnresolved) && fail == nil {
				fail = err
			}
		}()
		return nil
	})
	wg.Wait()
	if err == nil {
		err = fail
	}
	if err != nil {
		return rep, err
	}
	if left := rep.Count(ActionLeft) + rep.Count(ActionStale) + rep.Count(ActionFailed); left > 0 {
		return rep, unresolved(left)
	}
	return rep, nil
}

// eachPage calls fn with every page of the database's SKUs.
func (r *Reconciler) eachPage(ctx context.Context, fn func(skus []string) error) error {
	after := ""
	for {
		skus, err := r.record.SKUs(ctx, after, r.cfg.BatchSize)
		if err != nil {
			return fmt.Errorf("reconcile: list SKUs: %w", err)
		}
		if len(skus) == 0 {
			return nil
		}
		if err := fn(skus); err != nil {
			return err
		}
		if len(skus) < r.cfg.BatchSize {
			return nil
		}
		after = skus[len(skus)-1]
	}
}

// repairBatch examines and corrects one batch, reading again the SKUs an
// administrative write moved, up to Config.MaxAttempts times.
func (r *Reconciler) repairBatch(ctx context.Context, skus []string, dry bool) (Report, error) {
	rep := Report{Checked: len(skus)}
	for attempt := 1; len(skus) > 0; attempt++ {
		fs, again, err := r.examineTwice(ctx, skus, attempt)
		if err != nil {
			return rep, err
		}
		var rebuild []*finding
		for i := range fs {
			f := &fs[i]
			switch {
			case f.stale && attempt < r.cfg.MaxAttempts:
				again = append(again, f.sku)
			case f.err != nil:
				r.note(&rep, f.correction(ActionFailed, f.err))
			case f.stale:
				r.note(&rep, f.correction(ActionStale, fmt.Errorf("reconcile: SKU %q kept changing under administrative writes", f.sku)))
			case !f.rec.Exists && f.gate.Exists:
				r.note(&rep, f.correction(ActionFailed, fmt.Errorf("%w: %q", errNotInRecord, f.sku)))
			case !f.rec.Exists:
				rep.InAgreement++ // on sale nowhere
			case !f.gate.Exists && dry:
				r.note(&rep, f.correction(ActionDryRun, nil))
			case !f.gate.Exists:
				rebuild = append(rebuild, f)
			case f.delta() == 0:
				rep.InAgreement++
			case dry:
				r.note(&rep, f.correction(ActionDryRun, nil))
			case r.cfg.MaxAutoFix >= 0 && abs(f.delta()) > r.cfg.MaxAutoFix:
				r.note(&rep, f.correction(ActionLeft, nil))
			default:
				applied, err := r.gate.Adjust(ctx, f.sku, f.epoch, f.delta())
				switch {
				case (errors.Is(err, stock.ErrUnknownSKU) || errors.Is(err, stock.ErrInvalid)) && attempt < r.cfg.MaxAttempts:
					// Flushed since the reading (rebuild it), or Redis sold
					// the units a negative correction would remove: read again.
					again = append(again, f.sku)
				case err != nil && stock.IsBusiness(err):
					r.note(&rep, f.correction(ActionFailed, fmt.Errorf("reconcile: adjust %q: %w", f.sku, err)))
				case err != nil:
					return rep, fmt.Errorf("reconcile: adjust %q: %w", f.sku, err)
				case !applied && attempt < r.cfg.MaxAttempts:
					again = append(again, f.sku)
				case !applied:
					r.note(&rep, f.correction(ActionStale, fmt.Errorf("reconcile: SKU %q kept changing under administrative writes", f.sku)))
				default:
					r.note(&rep, f.correction(ActionCorrected, nil))
				}
			}
		}
		if err := r.rebuild(ctx, &rep, rebuild); err != nil {
			return rep, err
		}
		skus = again
	}
	return rep, nil
}

// examineTwice examines skus, then examines again those that need a
// correction, and keeps a correction only when the second reading computes
// the same one: a one-sided moment no single reading can see (see the
// package doc) does not last from one reading to the next. SKUs whose two
// readings differ are returned in again, to be read anew, unless this is
// the last attempt (then the second reading stands).
func (r *Reconciler) examineTwice(ctx context.Context, skus []string, attempt int) (fs []finding, again []string, err error) {
	fs, err = r.examine(ctx, skus)
	if err != nil {
		return nil, nil, err
	}
	var recheck []string
	for i := range fs {
		if f := &fs[i]; f.needsCorrection() {
			recheck = append(recheck, f.sku)
		}
	}
	if len(recheck) == 0 {
		return fs, nil, nil
	}
	second, err := r.examine(ctx, recheck)
	if err != nil {
		return nil, nil, err
	}
	kept := fs[:0]
	j := 0
	for i := range fs {
		f := fs[i]
		if !f.needsCorrection() {
			kept = append(kept, f)
			continue
		}
		s := second[j]
		j++
		if s.delta() != f.delta() && attempt < r.cfg.MaxAttempts {
			again = append(again, f.sku)
			continue
		}
		kept = append(kept, s)
	}
	return kept, again, nil
}

// rebuild puts SKUs Redis has no state for on sale from the database.
func (r *Reconciler) rebuild(ctx context.Context, rep *Report, fs []*finding) error {
	if len(fs) == 0 {
		return nil
	}
	ls := make([]stock.Listing, len(fs))
	for i, f := range fs {
		ls[i] = stock.Listing{SKU: f.sku, Units: f.target, PerUserLimit: f.rec.PerUserLimit, HoldTTL: r.cfg.GateHold(f.rec.HoldTTL)}
	}
	if err := r.gate.PutOnSaleMany(ctx, ls); err != nil {
		return fmt.Errorf("reconcile: rebuild: %w", err)
	}
	for _, f := range fs {
		r.note(rep, f.correction(ActionRebuilt, nil))
	}
	return nil
}

// note records c in rep and reports it to the hook.
func (r *Reconciler) note(rep *Report, c Correction) {
	rep.Corrections = append(rep.Corrections, c)
	if r.cfg.OnCorrection != nil {
		r.cfg.OnCorrection(c)
	}
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
