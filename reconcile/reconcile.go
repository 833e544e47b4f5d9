package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/stockguard/stockguard/internal/typednil"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Reconciler keeps a Redis gate in agreement with its SQL record. It is
// safe for concurrent use, and any number of Reconcilers (on any number of
// nodes) may work on the same stores at once: each correction applies only
// to the Redis state it was computed from.
type Reconciler struct {
	gate   Gate
	record Record
	cfg    Config
}

// New returns a Reconciler that repairs gate (Redis, usually a
// *redisstock.Store) from record (the database, the source of truth,
// usually a *sqlstock.Store). It does no I/O. It fails with stock.ErrInvalid
// for a nil gate or record, and for a Config.RestockWindow that is not below
// the gate's Retention (the gate would forget restocks a pass still asks
// about).
func New(gate Gate, record Record, cfg Config) (*Reconciler, error) {
	if typednil.Is(gate) || typednil.Is(record) {
		return nil, &stock.InvalidError{Field: "reconcile.New", Reason: "nil store"}
	}
	keep := gate.Retention()
	if cfg.RestockWindow < 0 || (cfg.RestockWindow > 0 && cfg.RestockWindow >= keep) {
		return nil, &stock.InvalidError{Field: "config.RestockWindow", Reason: cfg.RestockWindow.String() +
			" is not within (0, the gate's Retention " + keep.String() + ")"}
	}
	if cfg.RestockWindow == 0 {
		cfg.RestockWindow = keep / 2
	}
	return &Reconciler{gate: gate, record: record, cfg: cfg.withDefaults()}, nil
}

// Repair reconciles the given SKUs: each SKU's Redis available count is
// brought to the database's available count minus the units Redis holds
// for orders the database has not recorded (plus the units the database
// still holds for orders Redis has returned, less the restocks the database
// applied and Redis has not yet), by a delta applied only if the SKU's
// fence is still the one read (no administrative write, no flush and
// rebuild since). Restocks in flight are then completed at Redis by their
// operation IDs. A SKU Redis has no state for is rebuilt from the database,
// only if it still has none when the rebuild runs (otherwise it is read
// again). Corrections larger than Config.MaxAutoFix are reported and left;
// with Config.DryRun nothing is changed.
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
	if err == nil && !r.cfg.DryRun {
		// Every SKU of the record was visited: one Redis has no state for
		// now is unknown, no longer lost (see redisstock Store.Calibrated).
		if cerr := r.gate.Calibrated(ctx); cerr != nil {
			err = fmt.Errorf("reconcile: %w", cerr)
		}
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

// note records c in rep and reports it to the hook.
func (r *Reconciler) note(rep *Report, c Correction) {
	rep.Corrections = append(rep.Corrections, c)
	if r.cfg.Observer.Correction != nil {
		r.cfg.Observer.Correction(observe.Correction{SKU: c.SKU, Action: c.Action.String(), Delta: c.Delta, Ended: c.Ended, Err: c.Err})
	}
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
