package stockguard

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// retryRepairAfter is how long a repair that failed (Redis down, say)
// waits before it is tried again.
const retryRepairAfter = time.Second

// Run does the Shop's background work until ctx ends, then returns
// ctx.Err():
//
//   - the reclaimer (stock.RunReclaimer with Config.Reclaim) returns the
//     holds that passed their deadline unpaid, at the gate and the record
//     (at the record alone while the gate cannot be reached);
//   - reconciliation (reconcile.Reconciler.Run) makes a full pass at once,
//     then every Config.Reconcile.Interval, and at once when Redis lost
//     its data (a restart, a failover, a flush);
//   - repairs: the SKUs a drift names (an order taken at the record alone
//     while the breaker was open, a sale confirmed at the record after its
//     gate hold ended) are reconciled at once, and again after a failure
//     or while live orders keep a SKU from settling (reconcile's
//     ActionStale); a correction larger than Config.Reconcile.MaxAutoFix
//     is left for a person (ActionLeft).
//
// The breaker recalibrates the gate by itself before traffic returns to
// it. Run it on every node: the work is safe to share. Failures go to
// Config.OnError and are retried.
func (s *Shop) Run(ctx context.Context) error {
	rc := s.cfg.Reclaim
	if rc.OnError == nil {
		rc.OnError = s.cfg.OnError
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = stock.RunReclaimer(ctx, s, rc) })
	wg.Go(func() { _ = s.rec.Run(ctx) })
	wg.Go(func() { s.repair(ctx) })
	wg.Wait()
	return ctx.Err()
}

// mark asks Run to reconcile skus soon (every SKU when skus is empty).
func (s *Shop) mark(skus []string) {
	s.mu.Lock()
	if len(skus) == 0 {
		s.all = true
	}
	for _, sku := range skus {
		s.dirty[sku] = true
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// repair reconciles the SKUs mark names, as they are named, until ctx
// ends.
func (s *Shop) repair(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		s.mu.Lock()
		skus, all := slices.Sorted(maps.Keys(s.dirty)), s.all
		clear(s.dirty)
		s.all = false
		s.mu.Unlock()
		var rep reconcile.Report
		var err error
		switch {
		case all:
			rep, err = s.rec.RepairAll(ctx)
		case len(skus) > 0:
			rep, err = s.rec.Repair(ctx, skus)
		}
		if err == nil || ctx.Err() != nil {
			continue
		}
		s.fail(err)
		if errors.Is(err, reconcile.ErrUnresolved) {
			// Again the SKUs that live traffic kept changing, or that
			// failed; a correction too large for MaxAutoFix waits for a
			// person (and the next full pass).
			all, skus = false, skus[:0]
			for _, c := range rep.Corrections {
				if c.Action == reconcile.ActionStale || c.Action == reconcile.ActionFailed {
					skus = append(skus, c.SKU)
				}
			}
			if len(skus) == 0 {
				continue
			}
		}
		t := time.NewTimer(retryRepairAfter)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if all {
			skus = nil
		}
		s.mark(skus)
	}
}

func (s *Shop) fail(err error) {
	if s.cfg.OnError != nil {
		s.cfg.OnError(err)
	}
}
