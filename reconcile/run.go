package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// Recalibrate has the signature of degrade.Config.Recalibrate: it repairs
// the SKU key (a per-SKU breaker), or every SKU when key is "" (the shared
// breaker). It returns an error, which keeps the breaker open, when the
// pass failed or left any SKU out of agreement: traffic should not return
// to a Redis that disagrees with the database by more than MaxAutoFix. A
// Reconciler with Config.DryRun cannot recalibrate: it fails with an error
// wrapping stock.ErrInvalid.
func (r *Reconciler) Recalibrate(ctx context.Context, key string) error {
	if r.cfg.DryRun {
		return &stock.InvalidError{Field: "reconcile.Config.DryRun", Reason: "a dry run changes nothing: it cannot recalibrate"}
	}
	var err error
	if key == "" {
		_, err = r.RepairAll(ctx)
	} else {
		_, err = r.Repair(ctx, []string{key})
	}
	return err
}

// Run reconciles until ctx ends, then returns ctx.Err(). It makes a full
// pass (RepairAll) at once, then every Config.Interval, and also as soon as
// a check every Config.WatchInterval finds that Redis lost its data: a
// server's run_id changed (a restart or a failover; on a Cluster each
// master is checked), a server appeared or went away, or the marker key a
// full pass sets is gone (FLUSHALL). Failed passes and checks go to
// Config.OnError and are retried at the next check.
func (r *Reconciler) Run(ctx context.Context) error {
	full := time.NewTicker(r.cfg.Interval)
	defer full.Stop()
	watch := time.NewTicker(r.cfg.WatchInterval)
	defer watch.Stop()
	var last redisstock.Servers
	due := true
	for {
		if due {
			s, err := r.fullPass(ctx)
			if err == nil || errors.Is(err, ErrUnresolved) {
				last, due = s, false // a person looks at what was left
			}
			if err != nil && ctx.Err() == nil {
				r.fail(err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-full.C:
			due = true
		case <-watch.C:
			s, err := r.gate.Servers(ctx)
			if err != nil {
				if ctx.Err() == nil {
					r.fail(fmt.Errorf("reconcile: check Redis: %w", err))
				}
				continue
			}
			if r.cfg.DryRun {
				s.Marked = true // a dry run sets no marker
			}
			if s.Changed(last) {
				due = true
			}
		}
	}
}

// fullPass reads the servers' identity, then runs RepairAll (which marks
// Redis first), and returns the identity the pass started from.
func (r *Reconciler) fullPass(ctx context.Context) (redisstock.Servers, error) {
	s, err := r.gate.Servers(ctx)
	if err != nil {
		return s, fmt.Errorf("reconcile: check Redis: %w", err)
	}
	s.Marked = true
	_, err = r.RepairAll(ctx)
	return s, err
}

func (r *Reconciler) fail(err error) {
	if r.cfg.OnError != nil {
		r.cfg.OnError(err)
	}
}
